package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/audit"
)

func TestAuditBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "-o", "xml"}, `unknown output format "xml": use table, json, yaml or markdown`},
		{[]string{"audit", "--kubeconfig", "/nonexistent/kubeconfig"}, "API server configuration"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tc.args, Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
		if code != ExitBadInput || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errb.String())
		}
	}
}

func TestAuditRender(t *testing.T) {
	r := audit.Report{Scope: "namespace llm", Summary: audit.Summary{Workloads: 2, WillNotStart: 1, OK: 1}, Workloads: []audit.Workload{
		{Kind: "Deployment", Namespace: "llm", Name: "too-long", Status: audit.LevelWillNotStart,
			Engines:  []audit.Engine{{Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "L4", GPUCount: 1}},
			Findings: []audit.Finding{{Level: audit.LevelWillNotStart, Code: "max_model_len_does_not_fit", Message: "a | b"}, {Level: audit.LevelInfo, Code: "max_model_len_auto", Message: "info"}}},
		{Kind: "Pod", Namespace: "llm", Name: "ok", Status: audit.StatusOK, Findings: []audit.Finding{}},
	}}
	var tb, mb bytes.Buffer
	if err := writeAuditTable(&tb, r); err != nil {
		t.Fatal(err)
	}
	table := tb.String()
	for _, want := range []string{"1 will not start", "WILL NOT START  llm", "meta-llama/Llama-3.1-8B-Instruct on 1 × L4", "  - [max_model_len_does_not_fit] a | b"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(strings.Split(table, "\n\n")[1], "max_model_len_auto") {
		t.Errorf("an info code in the table's findings column:\n%s", table)
	}
	if err := writeAuditMarkdown(&mb, r); err != nil {
		t.Fatal(err)
	}
	if md := mb.String(); !strings.Contains(md, "| WILL NOT START | llm | Deployment/too-long |") || !strings.Contains(md, "- `max_model_len_does_not_fit` a \\| b") {
		t.Errorf("markdown:\n%s", md)
	}
}
