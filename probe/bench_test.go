package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe/internal/enginesim"
	"headroom.dev/headroom/vllm"
)

// The launch-count benchmark. Over a grid of hidden KV capacities where the
// planner's prediction is off by -10% to +10%, it counts the engine
// launches each strategy needs and checks every answer against the true
// largest length (the hidden capacity in whole blocks, capped at the
// model's maximum: by vLLM's rule a request of L tokens fits when
// ceil(L / 16) blocks do). The engine is simEngine (no GPU here): the same
// log lines the stand-in process prints, read by the same parser.
//
//	go test ./probe -run TestLaunchGrid -v     prints the table
//	go test ./probe -run '^$' -bench Launches  reports launches per probe

// gridCase is one model on one GPU.
type gridCase struct{ model, gpu string }

var gridCases = []gridCase{
	{"meta-llama/Llama-3.1-8B-Instruct", "L4"},
	{"Qwen/Qwen3-8B", "A10G"},
	{"microsoft/Phi-3-mini-128k-instruct", "T4"},
	{"Qwen/Qwen2.5-32B-Instruct", "A100-80GB"},
}

// gridErrors are how far the hidden capacity is from the prediction.
var gridErrors = []float64{-0.10, -0.075, -0.05, -0.025, 0, 0.025, 0.05, 0.075, 0.10}

// gridRun is one way of probing: a release and a strategy.
type gridRun struct {
	name     string
	version  vllm.Version
	strategy Strategy
	// maxLaunches is the target; 0 = none (reported only).
	maxLaunches int
	// exact: every answer must be the true largest length.
	exact bool
}

var gridRuns = []gridRun{
	{"auto, vLLM 0.19.0 (has auto)", v019, StrategyAuto, 1, true},
	{"auto, vLLM 0.10.0 (no auto)", v010, StrategyAuto, 2, true},
	{"auto, vLLM 0.6.4 (V0)", v064, StrategyAuto, 2, true},
	{"auto, vLLM 0.8.5 (no estimate)", v085, StrategyAuto, 0, true},
	{"bisect (KAITO), vLLM 0.10.0", v010, StrategyBisect, 0, false},
}

type gridCell struct {
	truth, answer, launches int
}

// runGrid probes every case and error with one run.
func runGrid(t testing.TB, run gridRun) [][]gridCell {
	out := make([][]gridCell, len(gridCases))
	for i, gc := range gridCases {
		sp, dev := spec(t, gc.model), device(t, gc.gpu)
		// The capacity base is the planner's KV tokens under the rules of
		// a V1 release (V0's prediction at the model's full length says
		// nothing fits, so V0 is checked against the same capacities).
		base := run.version
		if !vllm.UsesV1(base, nil) {
			base = v010
		}
		b, err := memory.Plan(memory.Input{Model: sp, Device: dev, Settings: vllm.Settings{Version: base}})
		if err != nil || b.KVTokens <= 0 {
			t.Fatalf("%s on %s: no prediction (%v)", gc.model, gc.gpu, err)
		}
		for _, e := range gridErrors {
			blocks := int64(float64(b.KVTokens)*(1+e)) / 16
			hidden := blocks * 16
			truth := int(min(hidden, int64(sp.MaxPositions)))
			eng := &simEngine{cfg: enginesim.Config{Version: run.version, KVTokens: hidden, ModelMaxLen: sp.MaxPositions}}
			r, err := Run(context.Background(), Config{
				Engine: eng, Settings: vllm.Settings{Model: gc.model}, Model: sp, Device: dev,
				Strategy: run.strategy, MaxLaunches: 16,
			})
			if err != nil && run.exact {
				t.Errorf("%s: %s on %s, error %+.1f%%: %v", run.name, gc.model, gc.gpu, e*100, err)
			}
			out[i] = append(out[i], gridCell{truth: truth, answer: r.MaxModelLen, launches: r.Launches})
		}
	}
	return out
}

func TestLaunchGrid(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "\nlaunches per probe; hidden KV capacity = planner's prediction %+.0f%% .. %+.0f%%\n", gridErrors[0]*100, gridErrors[len(gridErrors)-1]*100)
	fmt.Fprintf(&table, "%-32s %6s %7s %8s %8s %8s\n", "strategy", "probes", "exact", "min", "mean", "max")
	for _, run := range gridRuns {
		cells := runGrid(t, run)
		n, exact, total, lo, hi := 0, 0, 0, 1<<30, 0
		for i, row := range cells {
			for j, c := range row {
				n++
				total += c.launches
				lo, hi = min(lo, c.launches), max(hi, c.launches)
				if c.answer == c.truth {
					exact++
				} else if run.exact {
					t.Errorf("%s: %s on %s, error %+.1f%%: answer %d, true %d", run.name, gridCases[i].model, gridCases[i].gpu, gridErrors[j]*100, c.answer, c.truth)
				}
				if run.maxLaunches > 0 && c.launches > run.maxLaunches {
					t.Errorf("%s: %s on %s, error %+.1f%%: %d launches, target %d", run.name, gridCases[i].model, gridCases[i].gpu, gridErrors[j]*100, c.launches, run.maxLaunches)
				}
			}
		}
		fmt.Fprintf(&table, "%-32s %6d %4d/%-2d %8d %8.2f %8d\n", run.name, n, exact, n, lo, float64(total)/float64(n), hi)
	}
	fmt.Fprintf(&table, "\nper case (launches auto@0.10.0 / bisect@0.10.0; true length; bisect's answer)\n")
	auto, kaito := runGrid(t, gridRuns[1]), runGrid(t, gridRuns[4])
	for i, gc := range gridCases {
		fmt.Fprintf(&table, "%-36s %-10s", gc.model, gc.gpu)
		for j := range gridErrors {
			fmt.Fprintf(&table, " %d/%d", auto[i][j].launches, kaito[i][j].launches)
		}
		fmt.Fprintf(&table, "\n%47s", "")
		for j := range gridErrors {
			fmt.Fprintf(&table, " %d:%d", auto[i][j].truth, kaito[i][j].answer)
		}
		fmt.Fprintln(&table)
	}
	t.Log(table.String())
}

func BenchmarkLaunches(b *testing.B) {
	for _, run := range gridRuns {
		b.Run(strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "").Replace(run.name), func(b *testing.B) {
			var launches, probes int
			for i := 0; i < b.N; i++ {
				for _, row := range runGrid(b, run) {
					for _, c := range row {
						launches += c.launches
						probes++
					}
				}
			}
			b.ReportMetric(float64(launches)/float64(probes), "launches/probe")
		})
	}
}
