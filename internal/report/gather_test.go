package report

import (
	"context"
	"strings"
	"testing"
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
