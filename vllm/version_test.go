package vllm

import (
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
	}{
		{"0.19.0", Version{0, 19, 0, ""}},
		{"v0.19.0", Version{0, 19, 0, ""}},
		{"V0.8.5", Version{0, 8, 5, ""}},
		{" 0.19 ", Version{0, 19, 0, ""}},
		{"0.19.1rc1", Version{0, 19, 1, "rc1"}},
		{"0.11.0+cu128", Version{0, 11, 0, "+cu128"}},
		{"0.10.1.1", Version{0, 10, 1, ".1"}},
		{"1", Version{1, 0, 0, ""}},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseVersion(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "v", "latest", "0..1", "0.x.1", "0.19a.1", "99999.0.0"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): no error", bad)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0.19.0", "0.19.0", 0},
		{"0.9.2", "0.10.0", -1}, // numeric, not string, order
		{"0.21.0", "0.20.9", 1},
		{"1.0.0", "0.99.99", 1},
		{"0.21.0rc1", "0.21.0", 0}, // suffixes do not order
	}
	for _, tt := range tests {
		if got := MustVersion(tt.a).Compare(MustVersion(tt.b)); got != tt.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	if !MustVersion("0.21.0").AtLeast(MustVersion("0.21.0")) || MustVersion("0.20.1").AtLeast(MustVersion("0.21.0")) {
		t.Error("AtLeast disagrees with Compare")
	}
}

// TestParseRelease: a release the rules know, one past them (taken, and
// said), and text that is no release (refused in one line). 0.0.0 was
// taken as "not given" and became the newest; "5" became 5.0.0 and
// "1e308" 1.0.0 with the suffix "e308", both planned as fine.
func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		past     bool
	}{
		{"0.21.0", "0.21.0", false},
		{"v0.10.1.1", "0.10.1.1", false},
		{"0.19.1rc2.dev153+g1b2c3d4", "0.19.1rc2.dev153+g1b2c3d4", false},
		{"0.6.4.post1", "0.6.4.post1", false},
		{"0.33.0", "0.33.0", false},
		{"0.33.0rc1", "0.33.0rc1", false},
		{"0.34.0", "0.34.0", true},
		{"99.99.99", "99.99.99", true},
	} {
		v, err := ParseRelease(tc.in)
		if err != nil || v.String() != tc.want {
			t.Errorf("ParseRelease(%q) = %v, %v; want %s", tc.in, v, err, tc.want)
			continue
		}
		note := PastRules(v)
		if (note != "") != tc.past {
			t.Errorf("PastRules(%s) = %q; want a note: %t", v, note, tc.past)
		}
		if tc.past && !strings.Contains(note, "newer than the newest release these rules know (0.33.0)") {
			t.Errorf("PastRules(%s) = %q", v, note)
		}
	}
	for _, tc := range []struct{ in, why string }{
		{"0.0.0", "older than vLLM's first release (0.1.0)"},
		{"0.0.9", "older than vLLM's first release"},
		{"5", "is one number"},
		{"v7", "is one number"},
		{"1e308", "PEP 440 suffix"},
		{"0.21.0-garbage", "PEP 440 suffix"},
		{"0.21.0; rm -rf /", "PEP 440 suffix"},
		{"latest", "not of the form"},
		{"", "empty"},
		{strings.Repeat("1", 200), "of 200 bytes"},
	} {
		v, err := ParseRelease(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseRelease(%q) = %v, %v; want one line saying %q", tc.in, v, err, tc.why)
		}
	}
}
