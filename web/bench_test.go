package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
)

const benchBody = `{"gpu": "H100-80GB", "command": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"}`

// BenchmarkPlanAPI is one /api/plan round trip over a real HTTP server;
// compare it with BenchmarkPlanBuild, the same report built in process, for
// what HTTP and JSON add.
func BenchmarkPlanAPI(b *testing.B) {
	srv := newServer(b)
	client := srv.Client()
	for b.Loop() {
		resp, err := client.Post(srv.URL+"/api/plan", "application/json", strings.NewReader(benchBody))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
}

func BenchmarkPlanBuild(b *testing.B) {
	req := report.Request{GPU: "H100-80GB", Command: strings.Fields("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"), Offline: true}
	env := report.Env{Getenv: getenv, FS: report.NoFS}
	for b.Loop() {
		e, err := report.Gather(context.Background(), env, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := report.Build(e, memory.Options{Policy: memory.PolicyHeadroom}); err != nil {
			b.Fatal(err)
		}
	}
}
