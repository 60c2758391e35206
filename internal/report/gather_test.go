package report

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
)

func gatherOffline(t *testing.T, req Request) Evidence {
	t.Helper()
	req.Offline = true
	e, err := Gather(context.Background(), offlineEnv(), req)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPlanRequiredFree: what must stay free is what the plan leaves of the
// card: at --gpu-memory-utilization 0.9 vLLM's budget alone is 0.9 of the
// total, and the CUDA context sits outside it, so less than a tenth of
// the card is left. At 1.0, budget and context together pass the card:
// no margin, and a note says so.
func TestPlanRequiredFree(t *testing.T) {
	e := gatherOffline(t, Request{GPU: "H100-80GB", Command: []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.9"}})
	r, err := PlanRequiredFree(e)
	if err != nil {
		t.Fatal(err)
	}
	total := e.Sel.Device.TotalBytes
	if r.Plan == nil || r.Bytes <= 0 || r.Bytes >= total/10 || r.Bytes != total-r.Plan.Footprint ||
		!strings.HasPrefix(r.Why, "the plan for meta-llama/Llama-3.1-8B-Instruct on H100-80GB leaves ") {
		t.Errorf("%+v of %d", r, total)
	}
	e = gatherOffline(t, Request{GPU: "L4", Command: []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "1.0"}})
	r, err = PlanRequiredFree(e)
	if err != nil || r.Bytes != 0 || r.Why != "" || !strings.Contains(strings.Join(r.Notes, "\n"), "the plan does not fit (footprint ") {
		t.Errorf("utilization 1.0: %+v, %v", r, err)
	}
}

// The plan says when a kernel pads the experts: gpt-oss-20b's MXFP4
// experts run Marlin on an A100, which takes the width to a multiple of 128
// and the hidden size to 256 (2,880 → 2,944 and 3,072: 9.0% more), and
// matmul_ogs on an H100, where 2,880 is already a multiple of 64.
func TestPlanNotesExpertPadding(t *testing.T) {
	for _, c := range []struct {
		gpu, want string
	}{
		{"A100-80GB", "held at 2944 × 3072 a GPU where the checkpoint's shard is 2880 × 2880 (Marlin takes them padded to its widths): 9.0% more"},
		{"H100-80GB", ""},
	} {
		r, err := Build(gatherOffline(t, Request{GPU: c.gpu, Command: []string{"vllm", "serve", "openai/gpt-oss-20b"}}), memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(r.Notes, "\n")
		if got := strings.Contains(notes, "MXFP4 experts are held"); got != (c.want != "") || !strings.Contains(notes, c.want) {
			t.Errorf("%s: notes %q, want %q", c.gpu, notes, c.want)
		}
	}
}
