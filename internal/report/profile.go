package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync/atomic"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// profileWorkers bounds the parsing goroutines: past a few cores the
// reading itself is the limit.
const profileWorkers = 4

// ProfileReport is `headroom profile -o json`.
type ProfileReport struct {
	Sources       []string              `json:"sources"`
	Requests      int64                 `json:"requests"`
	SkippedLines  int64                 `json:"skipped_lines"`
	OutputIsLimit int64                 `json:"output_is_max_tokens,omitempty"`
	Input         traffic.Summary       `json:"input_tokens"`
	Output        traffic.Summary       `json:"output_tokens"`
	Total         traffic.Summary       `json:"total_tokens"`
	Buckets       []traffic.Bucket      `json:"buckets"`
	WindowSeconds int64                 `json:"window_seconds"`
	Baseline      float64               `json:"baseline_long_share"`
	Windows       []traffic.Window      `json:"windows"`
	NoYear        bool                  `json:"windows_without_year,omitempty"`
	Concurrency   []traffic.Concurrency `json:"concurrency,omitempty"`
	Pools         []traffic.Pool        `json:"pools"`
	Plan          *ProfilePlan          `json:"plan,omitempty"`
	// PoolSeqs is, per pool name, the evidence for the pool's max-num-seqs
	// when it was chosen by replaying the pool's requests of the log.
	PoolSeqs map[string]*SeqsEvidence `json:"pool_max_num_seqs_from_traffic,omitempty"`
	Notes    []string                 `json:"notes,omitempty"`
}

// ProfilePlan names the deployment the concurrency and pools are for.
type ProfilePlan struct {
	Model         string  `json:"model"`
	GPU           string  `json:"gpu"`
	KVCacheTokens int64   `json:"kv_cache_tokens"`
	MaxModelLen   int     `json:"max_model_len"`
	MaxNumSeqs    int     `json:"max_num_seqs"`
	Utilization   float64 `json:"gpu_memory_utilization"`
	VLLMVersion   string  `json:"vllm_version"`
	// Problems and Warnings are the deployment's plan's, as `headroom
	// plan` finds them: with a problem vLLM would not start, and the
	// concurrency above is not one it serves.
	Problems []memory.Finding `json:"problems,omitempty"`
	Warnings []memory.Finding `json:"warnings,omitempty"`
}

// ProfileRequest is what a profile reads, and the deployment it sizes the
// traffic for.
type ProfileRequest struct {
	// Files are the request logs, plain or gzip; "-" reads Stdin.
	Files []string
	Stdin io.Reader
	// Options are the buckets' bounds and the window.
	Options traffic.Options
	// Plan, when set, names the deployment: each bucket's KV concurrency
	// and the pool split with each pool's flags, under Policy.
	Plan   *Request
	Policy string
	// ReplayRequests and ReplaySeed bound the replay of a pool's requests
	// that chooses its max-num-seqs, as plan --profile bounds its own.
	ReplayRequests int
	ReplaySeed     uint64
	// Reading, when set, is called as each file starts with its size (0
	// when unknown) and the count of bytes read so far; it returns the
	// function called when the file is read.
	Reading func(name string, size int64, done *atomic.Int64) (stop func())
}

// Profile reads the request logs and reports their traffic. Every error
// is bad input, one line.
func Profile(ctx context.Context, env Env, req ProfileRequest) (ProfileReport, error) {
	p, err := traffic.NewProfile(req.Options)
	if err != nil {
		return ProfileReport{}, err
	}
	for _, name := range req.Files {
		if err := readProfile(ctx, p, name, req); err != nil {
			return ProfileReport{}, err
		}
	}
	if p.Requests() == 0 {
		return ProfileReport{}, traffic.NoRecords(strings.Join(req.Files, ", "), p.Skipped(), "")
	}
	rep := newProfileReport(p, req.Files)
	if req.Plan != nil {
		if err := addProfilePlan(ctx, env, req, p, &rep); err != nil {
			return ProfileReport{}, err
		}
	}
	return rep, nil
}

// readProfile streams one file (or stdin) into p.
func readProfile(ctx context.Context, p *traffic.Profile, name string, req ProfileRequest) error {
	var done atomic.Int64
	var size int64
	if name != "-" {
		st, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("%s: %v", name, FileError(err))
		}
		size = st.Size()
	}
	if req.Reading != nil {
		defer req.Reading(name, size, &done)()
	}
	opt := traffic.ReadOptions{Workers: min(runtime.GOMAXPROCS(0), profileWorkers), Progress: &done}
	var err error
	if name == "-" {
		err = traffic.Read(ctx, req.Stdin, p, opt)
	} else {
		err = traffic.ReadFile(ctx, name, p, opt)
	}
	if err != nil {
		return fmt.Errorf("%s: %v", name, FileError(err))
	}
	return nil
}

// FileError is err without the operation and path an *fs.PathError
// repeats, for a message that names the file itself.
func FileError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

func newProfileReport(p *traffic.Profile, files []string) ProfileReport {
	w := p.Windows()
	rep := ProfileReport{Sources: files, Requests: p.Requests(), SkippedLines: p.Skipped(), OutputIsLimit: p.OutputIsLimit(),
		Input: p.Input().Summary(), Output: p.Output().Summary(), Total: p.Total().Summary(), Buckets: p.Buckets(),
		WindowSeconds: w.Seconds, Baseline: w.Baseline, Windows: w.Windows, NoYear: w.NoYear, Pools: []traffic.Pool{}}
	if p.OutputIsLimit() > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d requests came from vLLM's request log, which shows max_tokens rather than what was generated: their output is an upper bound", p.OutputIsLimit()))
	}
	if w.Capped {
		rep.Notes = append(rep.Notes, "the log spans more windows than are kept; use a longer --window")
	}
	if w.Seconds > 0 && p.Timed() == 0 {
		rep.Notes = append(rep.Notes, "no request carried a time: no windows")
	}
	return rep
}

// addProfilePlan sizes the buckets against the planner and splits pools.
// Each pool's max-num-seqs is chosen by replaying its requests of the log
// (poolTraffic) where the log can be read again: one file whose every
// request carries a time.
func addProfilePlan(ctx context.Context, env Env, req ProfileRequest, p *traffic.Profile, rep *ProfileReport) error {
	e, err := Gather(ctx, env, *req.Plan)
	if err != nil {
		return err
	}
	in := memory.Input{Model: e.Spec, Device: e.Sel.Device, Count: e.Sel.Count, Settings: e.Settings, Draft: e.Draft, GPUsPerNode: e.GPUsPerNode}
	if e.AutoCount {
		in.Count = 0 // the count follows the parallelism, as plan takes it
	}
	b, err := memory.Plan(in)
	if err != nil {
		return err
	}
	rep.Plan = &ProfilePlan{Model: e.Spec.ID, GPU: e.Sel.Device.Name, KVCacheTokens: b.KVTokens, MaxModelLen: b.MaxModelLen,
		MaxNumSeqs: b.Settings.MaxNumSeqs, Utilization: b.Settings.GPUMemoryUtilization, VLLMVersion: b.Settings.Version.String(),
		Problems: b.Problems, Warnings: b.Warnings}
	rep.Concurrency = traffic.BucketConcurrency(p, b)
	var choose traffic.SeqsChooser
	switch files := req.Files; {
	case len(files) != 1 || files[0] == "-":
		rep.Notes = append(rep.Notes, "pool max-num-seqs from the rule (KV tokens ÷ the pool's p90 tokens): only one log file, not stdin, can be replayed to simulate them")
	case p.Timed() != p.Requests():
		rep.Notes = append(rep.Notes, "pool max-num-seqs from the rule (KV tokens ÷ the pool's p90 tokens): the log's requests need times to be replayed")
	default:
		choose = func(pool *traffic.Pool, in memory.Input, rec *memory.Recommendation) error {
			ev, note, err := ChooseSeqs(ctx, in, rec, poolTraffic(files[0], *pool, req.ReplayRequests, req.ReplaySeed))
			if err != nil && !errors.Is(err, context.Canceled) {
				// A log profile reads is not always one a replay can
				// follow (lines out of time order from several
				// writers): the pool keeps the rule, and says why.
				note, err = "max-num-seqs from the rule (KV tokens ÷ the pool's p90 tokens), not simulated: "+err.Error(), nil
			}
			if note != "" {
				rep.Notes = append(rep.Notes, pool.Name+" pool: "+note)
			}
			if ev != nil {
				if rep.PoolSeqs == nil {
					rep.PoolSeqs = map[string]*SeqsEvidence{}
				}
				rep.PoolSeqs[pool.Name] = ev
			}
			return err
		}
	}
	if rep.Pools, err = traffic.SplitWith(p, in, memory.Options{Policy: req.Policy}, choose); err != nil {
		return err
	}
	rep.Notes = append(rep.Notes, e.Notes...)
	return nil
}

// poolTraffic replays a pool's requests of a log at their logged arrivals
// (up to max of them): the short pool takes the requests up to its bound,
// the long pool those from its bound up, longer ones included (there they
// are rejected and counted, as in simulate --compare).
func poolTraffic(name string, pool traffic.Pool, max int, seed uint64) Traffic {
	lo, hi, long := pool.MinTokens, pool.MaxTokens, pool.Name == "long"
	return Traffic{
		Describe: fmt.Sprintf("the %s pool's requests (%d-%d tokens) of %s, up to %s, at their logged arrivals", pool.Name, lo, hi, name, vllm.Thousands(int64(max))),
		Spec:     workload.Spec{Log: name, Speedup: 1, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: seed},
		Keep: func(r workload.Request) bool {
			t := int64(r.Prompt + r.Output)
			return t >= lo && (long || t <= hi)
		},
		Max: max,
	}
}
