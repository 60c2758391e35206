package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/workload"
)

// requestLog writes 100 requests one minute apart: 90 of 600 + 100 = 700
// tokens, every tenth 9,000 + 1,000 = 10,000 tokens.
func requestLog(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i := range 100 {
		in, out := 600, 100
		if i%10 == 0 {
			in, out = 9000, 1000
		}
		fmt.Fprintf(&b, "2025-06-20T%02d:%02d:00Z input_tokens=%d output_tokens=%d\n", 12+i/60, i%60, in, out)
	}
	name := filepath.Join(t.TempDir(), "requests.log")
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func offlineEnv() Env { return Env{Getenv: func(string) string { return "" }} }

func profileRequest(files ...string) ProfileRequest {
	return ProfileRequest{Files: files, Options: traffic.Options{Bounds: traffic.DefaultBounds, Window: traffic.DefaultWindow},
		ReplayRequests: 20000, ReplaySeed: 1}
}

// TestProfile: the log's requests, buckets and windows, each file's size
// told to Reading; without a deployment, no plan and no pools.
func TestProfile(t *testing.T) {
	name := requestLog(t)
	st, _ := os.Stat(name)
	req := profileRequest(name)
	var told []string
	req.Reading = func(n string, size int64, done *atomic.Int64) func() {
		return func() { told = append(told, fmt.Sprintf("%s %d %d", n, size, done.Load())) }
	}
	r, err := Profile(context.Background(), offlineEnv(), req)
	if err != nil {
		t.Fatal(err)
	}
	// 100 requests from 12:00 to 13:39: twenty five-minute windows.
	if r.Requests != 100 || len(r.Buckets) != 4 || r.Buckets[1].Count != 90 || r.Buckets[3].Count != 10 || len(r.Windows) != 20 ||
		r.Plan != nil || r.Pools == nil || len(r.Pools) != 0 || len(r.Notes) != 0 {
		t.Errorf("%+v", r)
	}
	if want := fmt.Sprintf("%s %d %d", name, st.Size(), st.Size()); len(told) != 1 || told[0] != want {
		t.Errorf("Reading told %q, want %q", told, want)
	}
}

// TestProfilePlan: with a deployment, each bucket's KV concurrency and two
// pools; one timed file is replayed to choose each pool's max-num-seqs,
// two files (or stdin) keep the rule and say why.
func TestProfilePlan(t *testing.T) {
	name := requestLog(t)
	req := profileRequest(name)
	req.Plan = &Request{Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-80GB", Offline: true}
	r, err := Profile(context.Background(), offlineEnv(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The long pool: the longest request, 10,000, rounded up to 10,240.
	if r.Plan == nil || r.Plan.Model != "meta-llama/Llama-3.1-8B-Instruct" || r.Plan.GPU != "H100-80GB" || len(r.Concurrency) != 2 ||
		len(r.Pools) != 2 || r.Pools[0].MaxModelLen != 2048 || r.Pools[1].MaxModelLen != 10240 {
		t.Fatalf("%+v", r)
	}
	if r.PoolSeqs["short"] == nil || r.PoolSeqs["long"] == nil || !strings.Contains(r.PoolSeqs["short"].Traffic, "the short pool's requests (0-2048 tokens) of "+name+", up to 20,000") {
		t.Errorf("pool evidence %+v", r.PoolSeqs)
	}
	req.Files = []string{name, name}
	if r, err = Profile(context.Background(), offlineEnv(), req); err != nil || r.PoolSeqs != nil ||
		!strings.Contains(strings.Join(r.Notes, "\n"), "only one log file, not stdin, can be replayed") {
		t.Errorf("two files: %v %+v", err, r)
	}
}

func TestProfileBadInput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "x.log")
	os.WriteFile(empty, []byte("no counts here\n"), 0o644)
	for _, c := range []struct {
		req  ProfileRequest
		want string
	}{
		{profileRequest(empty), empty + ": no request records in 1 line: lines need input_tokens="},
		{profileRequest(empty + ".missing"), empty + ".missing: no such file or directory"},
		{ProfileRequest{Files: []string{empty}, Options: traffic.Options{Bounds: []int64{9, 3}}}, ""},
	} {
		_, err := Profile(context.Background(), offlineEnv(), c.req)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.req.Files, err, c.want)
		}
	}
}

// endless is an endless request log of empty lines.
type endless struct{}

func (endless) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = '\n'
	}
	return len(b), nil
}

func (endless) Close() error { return nil }

// An interrupt stops the reading of a request log that never ends (or a
// gzip bomb's text): the run returns within a second, canceled.
func TestSimulateInterruptWhileReading(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	files := func(string) (io.ReadCloser, error) { return endless{}, nil }
	req := SimRequest{Engine: EngineRequest{Plan: Request{Model: "Qwen/Qwen2.5-7B-Instruct", GPU: "L40S", Offline: true}, StepTime: "fixed:10ms"},
		Workload: workload.Spec{Log: "endless.jsonl", Speedup: 1, Prompt: workload.Fixed(100), Output: workload.Fixed(4)}}
	start := time.Now()
	_, err := Simulate(ctx, offlineEnv(), files, req)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("%v after %s", err, time.Since(start))
	}
}
