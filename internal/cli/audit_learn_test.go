package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/audit"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/vllm"
)

// TestAuditLearn: --learn writes one record per real pod compared, names
// the file, and writes nothing for a simulated stand-in.
func TestAuditLearn(t *testing.T) {
	dir := t.TempDir()
	var errb bytes.Buffer
	env := Env{Stderr: &errb, Getenv: func(k string) string {
		if k == "XDG_CACHE_HOME" {
			return dir
		}
		return ""
	}}
	path := filepath.Join(dir, "headroom", "calibration.jsonl")
	rec := probe.Record{Model: "Qwen/Qwen3-14B", GPU: "H100-80GB", VLLMVersion: vllm.MustVersion("0.21.0"), NumGPUBlocks: 500, KVTokens: 8000, AvailableKVBytes: 8000 * 163840, Source: "live server p"}
	sim := audit.PodKV{Namespace: "llm", Pod: "standin", Simulated: true, Gap: memory.KVGap{ActualBlocks: 400}, Record: rec}
	if err := learn(env, audit.Report{KVVsPlan: []audit.PodKV{sim}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a simulated server was learned: %v", err)
	}
	if !strings.Contains(errb.String(), "not learned: pod llm/standin is a simulated stand-in") {
		t.Errorf("stderr: %s", errb.String())
	}
	real := audit.PodKV{Namespace: "llm", Pod: "p", Model: rec.Model, GPU: rec.GPU, Version: "0.21.0", Gap: memory.KVGap{ActualBlocks: 500, ActualTokens: 8000}, Record: rec, Learnable: true}
	errb.Reset()
	if err := learn(env, audit.Report{KVVsPlan: []audit.PodKV{sim, real}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, _, err := probe.ReadRecords(f)
	if err != nil || len(recs) != 1 || recs[0].NumGPUBlocks != 500 || recs[0].Source != "live server p" {
		t.Fatalf("records %+v, %v", recs, err)
	}
	if !strings.Contains(errb.String(), "learned: "+path) {
		t.Errorf("the file is not named: %s", errb.String())
	}
}

// TestAuditKVRanking: the table and the markdown list the compared pods
// smallest share first, the simulated one marked.
func TestAuditKVRanking(t *testing.T) {
	r := audit.Report{Scope: "namespace llm", Workloads: []audit.Workload{{Kind: "Pod", Namespace: "llm", Name: "short", Status: audit.StatusOK}}, KVVsPlan: []audit.PodKV{
		{Namespace: "llm", Pod: "short", Model: "Qwen/Qwen3-14B", GPU: "H100-80GB", Version: "0.21.0", Gap: memory.KVGap{Share: 0.31, ActualBlocks: 9000, PredictedBlocks: 29000}},
		{Namespace: "llm", Pod: "standin", Simulated: true, Model: "Qwen/Qwen3-14B", GPU: "H100-80GB", Version: "0.21.0", Gap: memory.KVGap{Share: 0.99, ActualBlocks: 28710, PredictedBlocks: 29000}},
	}}
	var table, md bytes.Buffer
	if err := writeAuditTable(&table, r); err != nil {
		t.Fatal(err)
	}
	if err := writeAuditMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "markdown": md.String()} {
		short, sim := strings.Index(out, "short"), strings.Index(out, "standin (simulated)")
		if short < 0 || sim < short || !strings.Contains(out, "31%") || !strings.Contains(out, "9000/29000") {
			t.Errorf("%s:\n%s", name, out)
		}
	}
}
