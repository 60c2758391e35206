package admission

import (
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
)

// A pod pinned to g5.2xlarge (one A10G) runs only what one A10G runs: a
// change of flags keeps its place and words; 2 × A10G moves after it and
// names the smallest AWS type with two or more (g5.12xlarge, 4); another
// GPU names an AWS type that has it (p4d.24xlarge, 8 × A100-40GB). The
// planner's slice is left as it was (the plan cache shares it).
func TestPinnedAlternatives(t *testing.T) {
	node, err := gpu.Resolve("g5.2xlarge")
	if err != nil {
		t.Fatal(err)
	}
	in := memory.Input{Device: node.Device, Count: 1}
	alts := []memory.Alternative{
		{Code: memory.AltMoreGPUs, GPU: "A10G", Count: 2, Message: "use 2 × A10G with --tensor-parallel-size 2"},
		{Code: memory.AltBiggerGPU, GPU: "A100-40GB", Count: 1, Message: "the smallest GPU that fits with these settings: 1 × A100-40GB (39.39 GiB each)"},
		{Code: memory.AltKVCacheFP8, Args: []string{"--kv-cache-dtype", "fp8"}, Message: "store the KV cache in fp8 (--kv-cache-dtype fp8): half the bytes per token"},
	}
	got := pinnedAlternatives(alts, in, node)
	want := []string{
		"store the KV cache in fp8 (--kv-cache-dtype fp8): half the bytes per token",
		"use 2 × A10G with --tensor-parallel-size 2 on a larger instance type: g5.2xlarge has 1, g5.12xlarge has 4",
		"the smallest GPU that fits with these settings: 1 × A100-40GB (39.39 GiB each), on an instance type that has it (p4d.24xlarge: 8 × A100-40GB)",
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i].Message != want[i] {
			t.Errorf("%d: %q\nwant %q", i, got[i].Message, want[i])
		}
	}
	if alts[0].Message != "use 2 × A10G with --tensor-parallel-size 2" {
		t.Errorf("the planner's alternatives were changed: %q", alts[0].Message)
	}
	// Not pinned: as the planner ranks them.
	if got := pinnedAlternatives(alts, in, gpu.Selection{}); got[0].Message != alts[0].Message {
		t.Errorf("unpinned: %+v", got)
	}
	// Pinned to a type of four: two of them run there.
	big, _ := gpu.Resolve("g5.12xlarge")
	if got := pinnedAlternatives(alts, in, big); got[0].Message != alts[0].Message {
		t.Errorf("g5.12xlarge: %+v", got)
	}
}
