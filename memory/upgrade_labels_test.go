package memory_test

import (
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// Two releases the rules do not tell apart (0.33.0 and its release
// candidate) are two sides all the same, each labelled as given: the
// upgrade 0.33.0 -> 0.33.0rc1 was shown as "0.33.0rc1 -> 0.33.0rc1" in
// both directions.
func TestUpgradeWithinOneRuleSetKeepsBothReleases(t *testing.T) {
	for _, tc := range []struct{ from, to string }{{"0.33.0", "0.33.0rc1"}, {"0.33.0rc1", "0.33.0"}, {"0.21.0", "0.21.0"}} {
		set := vllm.Settings{Version: vllm.MustVersion(tc.from), MaxModelLen: 8192}
		in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Count: 1, Settings: set}
		u, err := memory.PlanUpgrade(in, vllm.MustVersion(tc.to))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := u.Before.Settings.Version.String()+" -> "+u.After.Settings.Version.String(), tc.from+" -> "+tc.to; got != want {
			t.Errorf("planned %s, want %s", got, want)
		}
		if u.Before.KVTokens != u.After.KVTokens || len(u.Changes) != 0 {
			t.Errorf("%s -> %s: KV %d -> %d, changes %+v; the rules are the same", tc.from, tc.to, u.Before.KVTokens, u.After.KVTokens, u.Changes)
		}
	}
}
