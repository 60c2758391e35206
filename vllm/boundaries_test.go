package vllm

import "testing"

// TestBoundaries: the list is oldest first, ends at the newest release
// known, and names every profile-run boundary.
func TestBoundaries(t *testing.T) {
	b := Boundaries()
	for i := 1; i < len(b); i++ {
		if b[i].Since.Compare(b[i-1].Since) < 0 {
			t.Errorf("%s (%s) comes after %s (%s)", b[i].Rule, b[i].Since, b[i-1].Rule, b[i-1].Since)
		}
	}
	if last := b[len(b)-1].Since; last != Newest() {
		t.Errorf("the list ends at %s, the newest known is %s", last, Newest())
	}
	seen := map[Version]bool{}
	for _, x := range b {
		seen[x.Since] = true
		if x.Rule == "" || x.What == "" || x.Source == "" {
			t.Errorf("incomplete boundary %+v", x)
		}
	}
	for _, moe := range []bool{false, true} {
		for _, v := range ProfileBoundaries(moe) {
			if !seen[v] {
				t.Errorf("profile boundary %s is not listed", v)
			}
		}
	}
}
