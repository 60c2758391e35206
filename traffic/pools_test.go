package traffic

import (
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
)

func TestSplitAndConcurrency(t *testing.T) {
	spec, ok := catalog.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	if !ok {
		t.Fatal("catalog has no Llama-3.1-8B-Instruct")
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := NewProfile(Options{})
	// 90 short requests of 1,000 total tokens, 10 long of 9,000 (XL).
	for range 90 {
		p.Add(Record{Input: 900, Output: 100})
	}
	for range 10 {
		p.Add(Record{Input: 8500, Output: 500})
	}
	in := memory.Input{Model: spec, Device: sel.Device, Count: 1}
	pools, err := Split(p, in, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 {
		t.Fatalf("%d pools, want 2", len(pools))
	}
	short, long := pools[0], pools[1]
	// The short pool ends at the second bound (2,048); the long pool at
	// the longest request rounded up to 1,024: 9,000 -> 9,216.
	if short.MaxModelLen != 2048 || long.MaxModelLen != 9216 {
		t.Errorf("max-model-len %d / %d, want 2048 / 9216", short.MaxModelLen, long.MaxModelLen)
	}
	// p90s from the histogram: 1,000 lies in the bucket [1000, 1003] (width
	// 4 above 512), whose middle 1,001 is clamped to the largest value,
	// 1,000; 9,000 lies in [8960, 9023] (width 64 above 8192), middle
	// 8,991, within 1/256 of 9,000.
	if short.Requests != 90 || long.Requests != 10 || short.Share != 0.9 || short.P90Tokens != 1000 || long.P90Tokens != 8991 {
		t.Errorf("pools %+v / %+v", short, long)
	}
	// max-num-seqs is what the pool's KV cache holds at its p90 length
	// (memory.Recommend), capped by vLLM's default (1024 on an H100).
	for _, pl := range pools {
		if !pl.Fits || pl.MaxNumSeqs < 1 || pl.MaxNumSeqs > 1024 || int64(pl.MaxNumSeqs) > pl.KVTokens/pl.P90Tokens {
			t.Errorf("%s: max-num-seqs %d with %d KV tokens at p90 %d", pl.Name, pl.MaxNumSeqs, pl.KVTokens, pl.P90Tokens)
		}
		if len(pl.Args) == 0 || pl.Command == "" {
			t.Errorf("%s: no flags", pl.Name)
		}
	}
	if short.MaxNumSeqs <= long.MaxNumSeqs {
		t.Errorf("the short pool should run more requests at once: %d vs %d", short.MaxNumSeqs, long.MaxNumSeqs)
	}

	b, err := memory.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	cs := BucketConcurrency(p, b)
	if len(cs) != 2 || cs[0].Bucket != "S" && cs[0].Bucket != "M" || cs[1].Bucket != "XL" {
		t.Fatalf("concurrency %+v", cs)
	}
	// KV tokens / p90: the XL bucket's p90 reads 8,991 (see above).
	want := float64(b.KVTokens) / 8991
	if got := cs[1].KVConcurrency; got > want || want-got > 0.01 {
		t.Errorf("XL concurrency %v, want %v", got, want)
	}
}

func TestSplitOneSide(t *testing.T) {
	spec, _ := catalog.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	sel, _ := gpu.Resolve("L4")
	p, _ := NewProfile(Options{})
	p.Add(Record{Input: 100, Output: 10})
	pools, err := Split(p, memory.Input{Model: spec, Device: sel.Device}, memory.Options{})
	if err != nil || len(pools) != 1 || pools[0].Name != "short" {
		t.Errorf("pools %+v, %v", pools, err)
	}
	empty, _ := NewProfile(Options{})
	if _, err := Split(empty, memory.Input{Model: spec, Device: sel.Device}, memory.Options{}); err == nil {
		t.Error("split of no traffic")
	}
}
