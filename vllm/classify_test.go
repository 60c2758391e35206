package vllm

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// serveFlag is one line of testdata/serve-flags/flags.tsv.
type serveFlag struct {
	name         string
	since, until Version
}

func readServeFlags(t *testing.T) []serveFlag {
	t.Helper()
	f, err := os.Open("testdata/serve-flags/flags.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []serveFlag
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 {
			t.Fatalf("%q: want flag, since, until, source", line)
		}
		sf := serveFlag{name: cols[0]}
		for i, v := range []*Version{&sf.since, &sf.until} {
			if cols[1+i] == "" {
				continue
			}
			if *v, err = ParseVersion(cols[1+i]); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
		out = append(out, sf)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The releases the rules know: every boundary of the memory rules, and
// every release bound of the flag list.
func knownReleases(flags []serveFlag) []Version {
	var rs []Version
	for _, b := range Boundaries() {
		rs = append(rs, b.Since)
	}
	for _, f := range flags {
		for _, v := range []Version{f.since, f.until} {
			if !v.IsZero() {
				rs = append(rs, v)
			}
		}
	}
	slices.SortFunc(rs, func(a, b Version) int { return a.Compare(b) })
	return slices.Compact(rs)
}

func TestEveryFlagClassified(t *testing.T) {
	flags := readServeFlags(t)
	if len(flags) < 200 {
		t.Fatalf("only %d flags read", len(flags))
	}
	listed := map[string]serveFlag{}
	for _, f := range flags {
		if _, dup := listed[f.name]; dup {
			t.Errorf("%s listed twice", f.name)
		}
		listed[f.name] = f
	}
	for _, r := range knownReleases(flags) {
		n := 0
		for _, f := range flags {
			if !f.since.IsZero() && !r.AtLeast(f.since) || !f.until.IsZero() && r.AtLeast(f.until) {
				continue
			}
			n++
			if _, _, known := ClassifyFlag(f.name); !known {
				t.Errorf("vLLM %s: --%s is not classified", r, f.name)
			}
		}
		if n < 150 {
			t.Errorf("vLLM %s: only %d flags", r, n)
		}
	}
	// The bounds the plan refuses a flag by are the list's, and the table
	// holds no flag the list does not (a negative switch aside).
	for name, c := range flagClasses {
		if strings.HasPrefix(name, "no-") {
			continue
		}
		f, ok := listed[name]
		if !ok {
			t.Errorf("--%s is classified but not in vLLM's flag list", name)
			continue
		}
		if !c.since.IsZero() && c.since != f.since || !c.until.IsZero() && c.until != f.until {
			t.Errorf("--%s: refused outside [%s, %s), listed for [%s, %s)", name, c.since, c.until, f.since, f.until)
		}
	}
}

// A flag that may move memory is named; one that does not is not; a flag
// nobody knows is named too.
func TestNotModelled(t *testing.T) {
	s, err := ParseCommand(strings.Fields(`vllm serve m --compilation-config {"cudagraph_mode":"FULL"} --port 8000 --enable-lora --max-loras 2 --mystery-flag 3 --kv-offloading-size 8 --no-enable-prefix-caching --load-format bitsandbytes --limit-mm-per-prompt {"image":{"count":1,"width":512,"height":512}} --mm-processor-kwargs {"num_crops":4}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range s.NotModelled() {
		got = append(got, n.Flag)
	}
	want := []string{"compilation-config", FlagLimitMMPerPrompt, "load-format", FlagMMProcessorKwargs, "mystery-flag"}
	if !slices.Equal(got, want) {
		t.Errorf("named %q, want %q", got, want)
	}
	for _, n := range s.NotModelled() {
		if n.Why == "" || strings.Contains(n.String(), "\n") {
			t.Errorf("%+v", n)
		}
	}
	sp, err := ParseCommand(strings.Fields(`vllm serve m --speculative-config {"model":"pkg.mod.Proposer","num_speculative_tokens":2,"draft_sample_method":"probabilistic"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := sp.NotModelled(); len(n) != 2 {
		t.Errorf("a custom proposer with probabilistic sampling: %v", n)
	}
	if _, _, known := ClassifyFlag("compilation-config.cudagraph_mode"); !known {
		t.Error("a dotted key of a known object is not classified")
	}
	if e, _ := LoadFormatEffect("ipc_cache"); e != EffectPlanned {
		t.Errorf("ipc_cache: %s", e)
	}
}

// Each flag the 0.29–0.31 releases added is refused before 0.29 and taken
// from it; those removed are refused from their removal on.
func TestOutsideRelease(t *testing.T) {
	for _, tt := range []struct {
		line     string
		version  string
		outside  []string
		accepted string
	}{
		{"vllm serve m --device-memory-utilization 0.9 --max-num-queued-reqs 64 --max-num-queued-tokens 1M --max-num-active-seqs 32 --load-format ipc_cache", "0.28.0",
			[]string{FlagDeviceMemoryUtilization, "load-format", FlagMaxNumActiveSeqs, FlagMaxNumQueuedReqs, FlagMaxNumQueuedTokens}, "0.29.0"},
		{"vllm serve m --swap-space 4", "0.18.0", []string{FlagSwapSpace}, "0.17.1"},
		{"vllm serve m --enable-lora --lora-extra-vocab-size 512", "0.12.0", []string{FlagLoRAExtraVocabSize}, "0.11.2"},
		{"vllm serve m --kv-offloading-size 16", "0.13.0", []string{FlagKVOffloadingSize}, "0.14.0"},
	} {
		s, err := ParseCommand(strings.Fields(tt.line))
		if err != nil {
			t.Fatal(err)
		}
		s.Version = MustVersion(tt.version)
		var got []string
		for _, n := range s.OutsideRelease() {
			got = append(got, n.Flag)
		}
		if !slices.Equal(got, tt.outside) {
			t.Errorf("%s at %s: outside %q, want %q", tt.line, tt.version, got, tt.outside)
		}
		s.Version = MustVersion(tt.accepted)
		if n := s.OutsideRelease(); len(n) != 0 {
			t.Errorf("%s at %s: %v", tt.line, tt.accepted, n)
		}
	}
	// The alias reads as the utilization.
	s, err := ParseCommand(strings.Fields("vllm serve m --device_memory_utilization 0.85"))
	if err != nil {
		t.Fatal(err)
	}
	if s.GPUMemoryUtilization != 0.85 || !s.Set[FlagGPUMemoryUtilization] || !s.Set[FlagDeviceMemoryUtilization] {
		t.Errorf("--device_memory_utilization: %v, set %v", s.GPUMemoryUtilization, s.Set)
	}
}

// A flag no release has, one or two edits from one that does, is a typo
// vLLM's parser stops at; one near none stays "not modelled" (a plugin's,
// or a release the tables miss), as does a short name two edits away.
func TestMisspelled(t *testing.T) {
	s, err := ParseCommand(strings.Fields("vllm serve m --max-model-lenn 4096 --gpu-memory-utilisation 0.9 --mystery-flag 3 --tp 2"))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Misspelled()
	want := []FlagNote{{Flag: "gpu-memory-utilisation", Why: "did you mean --gpu-memory-utilization?"}, {Flag: "max-model-lenn", Why: "did you mean --max-model-len?"}}
	if !slices.Equal(got, want) {
		t.Errorf("misspelled %v, want %v", got, want)
	}
	var notModelled []string
	for _, n := range s.NotModelled() {
		notModelled = append(notModelled, n.Flag)
	}
	if !slices.Equal(notModelled, []string{"mystery-flag", "tp"}) {
		t.Errorf("not modelled %v, want mystery-flag and tp", notModelled)
	}
}
