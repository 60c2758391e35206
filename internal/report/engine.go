package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// EngineRequest asks for the simulated engine of a deployment: the plan
// of Plan, its scheduler flags (vLLM's, from the pasted command or
// Plan.Flags), and the step time.
type EngineRequest struct {
	Plan Request
	// StepTime is "roofline" (the default) or "fixed:DURATION". A fixed
	// step time is a hand-made engine: it has no API server either.
	StepTime string
	// Calibration names a file of calibration lines (CalibrationFile);
	// "" reads the one loadtest writes for the GPU, when there is one, and
	// says so in a note.
	Calibration string
	// MaxKVBlocks, when > 0, refuses an engine whose KV pool has more
	// blocks (ErrTooManyBlocks): a server's bound on what one request's
	// simulation may hold.
	MaxKVBlocks int
	// AcceptanceRate is --acceptance-rate, speculative decoding's
	// per-token acceptance; 0 takes the method's default (simspec.go).
	AcceptanceRate float64
}

// ErrTooManyBlocks is an engine past EngineRequest.MaxKVBlocks.
var ErrTooManyBlocks = errors.New("too many KV blocks")

// Engine is a planned deployment ready to simulate.
type Engine struct {
	Evidence Evidence
	Input    memory.Input
	Budget   memory.Budget
	// Calibration is what the step time was built from; StepTime says it
	// in words.
	Calibration sim.Calibration
	StepTime    string
	Timer       sim.StepTimer
	Config      sim.Config
	// NoAPIServer is set when the engine is served without vLLM's API
	// server (headroom's own stand-in, whose HTTP front end is Go's):
	// FrontEnd is zero then, as with a fixed step time.
	NoAPIServer bool
	// Spec is how speculative decoding is simulated (nil without).
	Spec  *SpecSim
	Notes []string
	// acceptance and its source are what speculate was given; specNotes
	// what it said.
	acceptance       float64
	acceptanceSource string
	specNotes        []string
	// cal keeps the calibration's measured steps for re-planned settings.
	cal calibration
}

// ErrNoKV is a plan without a KV cache to simulate.
var ErrNoKV = errors.New("no KV cache")

// Files opens the files a simulation names (a request log, a calibration).
// nil is the operating system's; a server passes NoFiles.
type Files func(name string) (io.ReadCloser, error)

// NoFiles refuses every file: a request to a server must not read its
// disk.
func NoFiles(name string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%s: files are not read here", name)
}

func (f Files) open(name string) (io.ReadCloser, error) {
	if f == nil {
		return os.Open(name)
	}
	return f(name)
}

// within is f whose files stop reading when ctx ends: a long or endless
// request log honours an interrupt while it is read.
func (f Files) within(ctx context.Context) func(name string) (io.ReadCloser, error) {
	return func(name string) (io.ReadCloser, error) {
		rc, err := f.open(name)
		if err != nil {
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{traffic.ContextReader(ctx, rc), rc}, nil
	}
}

// NewEngine gathers and plans the request and builds its engine. A plan
// that does not fit has no engine unless --num-gpu-blocks-override gives
// the pool: the error then lists the plan's problems.
func NewEngine(ctx context.Context, env Env, files Files, req EngineRequest) (*Engine, error) {
	ev, err := Gather(ctx, env, req.Plan)
	if err != nil {
		return nil, err
	}
	set := ev.Settings
	if set.NumGPUBlocksOverride < 0 || set.LongPrefillTokenThreshold < 0 {
		return nil, errors.New("--num-gpu-blocks-override and --long-prefill-token-threshold must not be negative")
	}
	var cal calibration
	if req.Calibration == "" {
		var note string
		cal, note = userCalibration(env, files, ev.Sel.Device)
		if note != "" {
			ev.Notes = append(ev.Notes, note)
		}
	} else if cal, err = CalibrationFile(files, req.Calibration, ev.Sel.Device); err != nil {
		return nil, err
	}
	in := memory.Input{Model: ev.Spec, Device: ev.Sel.Device, Count: ev.Sel.Count, Settings: set, Measured: ev.Measured, Draft: ev.Draft}
	if ev.AutoCount {
		in.Count = 0
	}
	if req.AcceptanceRate != 0 && set.Speculative == nil {
		return nil, errors.New("--acceptance-rate is speculative decoding's: give --speculative-config too, as vLLM serve takes it")
	}
	e := &Engine{Evidence: ev, Input: in, Notes: ev.Notes, cal: cal, acceptance: req.AcceptanceRate, acceptanceSource: "--acceptance-rate"}
	if err := e.plan(set, req.StepTime); err != nil {
		return nil, err
	}
	e.Notes = append(e.Notes, e.specNotes...)
	if !e.Budget.Fits && set.NumGPUBlocksOverride == 0 {
		var msgs []string
		for _, p := range e.Budget.Problems {
			msgs = append(msgs, p.Message)
		}
		return e, &NoFitError{Problems: msgs}
	}
	if req.MaxKVBlocks > 0 && e.Config.NumGPUBlocks > req.MaxKVBlocks {
		return nil, fmt.Errorf("%w: the KV pool has %d blocks, at most %d here (lower num-gpu-blocks-override, or run `headroom simulate`)", ErrTooManyBlocks, e.Config.NumGPUBlocks, req.MaxKVBlocks)
	}
	if set.NumGPUBlocksOverride > 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("KV pool from --num-gpu-blocks-override %d (the plan has %d blocks)", set.NumGPUBlocksOverride, e.Budget.NumBlocks))
	}
	if pp := set.PipelineParallelSize; pp > 1 {
		e.Notes = append(e.Notes, fmt.Sprintf("--pipeline-parallel-size %d: up to %d batches in flight, each stage running 1/%d of a pass (vLLM's batch queue); steps count batches, and the engine's busy time is one stage's GPU with the engine core's CPU beside it", pp, pp, pp))
	}
	if si := set.StreamInterval; si > 1 {
		e.Notes = append(e.Notes, fmt.Sprintf("--stream-interval %d: a client gets a request's first token at once, then its tokens %d at a time, so ITL is the gap between those chunks (about %d steps); TTFT and TPOT do not move, and the API server's time is still priced per token, as the calibration rows stream every token", si, si, si))
	}
	if dp := set.DataParallelSize; dp > 1 {
		n := fmt.Sprintf("%s %d: simulated as %d engines, each with its own scheduler and KV cache, behind one API server that sends each request to the engine of the lowest waiting × 4 + running (vLLM's DP load balancer); engine time is their mean, steps are all of theirs", DataParallelNote, dp, dp)
		if r, ok := e.Timer.(*sim.Roofline); ok && r.DataParallel > 1 {
			n += fmt.Sprintf("; as a MoE model's ranks, they step in lockstep (an idle rank runs a dummy step) and each computes every rank's tokens on its 1/%d of each expert, gathering and scattering them across the ranks in every MoE layer", dp*max(set.TensorParallelSize, 1))
		}
		e.Notes = append(e.Notes, n)
	}
	return e, nil
}

// DataParallelNote starts the note of a data-parallel engine's
// simulation (runDataParallel), which the stand-in server, serving one
// engine, says otherwise.
const DataParallelNote = "--data-parallel-size"

// NoFitError is a simulation of settings vLLM would not start with: they
// do not fit, or vLLM refuses them.
type NoFitError struct{ Problems []string }

func (e *NoFitError) Error() string {
	return "vLLM would not start with this plan, so there is no engine to simulate (see `headroom plan`; for the KV cache alone, give --num-gpu-blocks-override): " + strings.Join(e.Problems, "; ")
}

// plan plans the engine at settings set.
func (e *Engine) plan(set vllm.Settings, stepTime string) error {
	in := e.Input
	in.Settings = set
	b, err := memory.Plan(in)
	if err != nil {
		return err
	}
	e.Input, e.Budget = in, b
	var fitted sim.Calibration
	if e.Timer, e.StepTime, fitted, err = stepTimer(stepTime, b, e.cal); err != nil {
		return err
	}
	if _, ok := e.Timer.(*sim.Roofline); ok {
		e.Calibration = fitted
	}
	e.Config = sim.ConfigFor(b, e.Timer)
	s := b.Settings
	if s.NumGPUBlocksOverride > 0 {
		e.Config.NumGPUBlocks = s.NumGPUBlocksOverride
	}
	e.Config.LongPrefillTokenThreshold = s.LongPrefillTokenThreshold
	e.Config.NoChunkedPrefill, e.Config.NoPrefixCaching = s.Set[vllm.FlagNoChunkedPrefill], s.Set[vllm.FlagNoPrefixCaching]
	if err := e.speculate(b); err != nil {
		return err
	}
	if e.Config.NumGPUBlocks < 2 && b.Fits {
		return ErrNoKV
	}
	return nil
}

// At is the engine of the same deployment at other settings (the
// recommended ones, a max-num-seqs candidate): planned again, since the
// KV cache depends on them, with the same calibration.
func (e *Engine) At(set vllm.Settings) (*Engine, error) {
	o := &Engine{Evidence: e.Evidence, Input: e.Input, cal: e.cal, Notes: e.Notes, acceptance: e.acceptance, acceptanceSource: e.acceptanceSource}
	step := "roofline"
	if f, ok := e.Timer.(sim.Fixed); ok {
		step = fmt.Sprintf("fixed:%s", time.Duration(float64(f)*float64(time.Second)))
	}
	if err := o.plan(set, step); err != nil {
		return nil, err
	}
	return o, nil
}

// Run simulates spec's traffic on the engine; log says what a replayed
// log's lines were not taken as they are ("" when all were).
func (e *Engine) Run(ctx context.Context, files Files, spec workload.Spec, opt sim.RunOptions) (rep *sim.Report, log string, err error) {
	return e.run(ctx, files, spec, opt, nil)
}

// run is Run on the requests keep accepts (all when nil). A
// data-parallel server runs as its engines (sim.RunDataParallel).
func (e *Engine) run(ctx context.Context, files Files, spec workload.Spec, opt sim.RunOptions, keep func(workload.Request) bool) (*sim.Report, string, error) {
	if e.Config.NumGPUBlocks < 2 {
		return nil, "", ErrNoKV
	}
	st, closer, err := spec.Open(files.within(ctx))
	if err != nil {
		return nil, "", err
	}
	defer closer.Close()
	opt = e.clients(spec, opt)
	if dp := e.Budget.Settings.DataParallelSize; dp > 1 && keep == nil {
		rep, err := sim.RunDataParallel(ctx, e.Config, sim.FromWorkload(st), opt, dp)
		return rep, workload.LogNote(st), err
	}
	en, err := sim.New(e.Config)
	if err != nil {
		return nil, "", err
	}
	src := st
	if keep != nil {
		src = filtered{st, keep}
	}
	rep, err := sim.Run(ctx, en, sim.FromWorkload(src), opt)
	return rep, workload.LogNote(st), err
}

// FrontEnd is the API server's time for requests to endpoint
// (workload.EndpointChat or EndpointCompletions): zero with a fixed step
// time, which is a hand-made engine, or without vLLM's API server.
func (e *Engine) FrontEnd(endpoint string) sim.FrontEnd {
	if _, ok := e.Timer.(*sim.Roofline); !ok || e.NoAPIServer {
		return sim.FrontEnd{}
	}
	return e.Calibration.FrontEndFor(e.Budget, endpoint)
}

// EndpointNote says, for a model whose chat vLLM renders with a Jinja
// template, that requests to /v1/completions are priced without it, and
// on what; "" when the endpoint changes nothing (harmony's models, no API
// server) or the traffic is a chat, which the fitted rows are.
func (e *Engine) EndpointNote(endpoint string) string {
	chat, comp := e.FrontEnd(workload.EndpointChat).Request, e.FrontEnd(endpoint).Request
	if endpoint == workload.EndpointChat || chat == comp || !sim.RendersChatTemplate(e.Budget) {
		return ""
	}
	return fmt.Sprintf("requests to /v1/completions (vllm bench serve's default; --endpoint chat for a chat): the API server's %.1f ms of CPU a request is that of a request no Jinja chat template renders (gpt-oss's harmony chat, fitted; no serving run fitted calls /v1/completions); a chat request would cost %.1f ms", comp*1e3, chat*1e3)
}

// clients is opt with the engine's API server and spec's clients (a
// closed loop's concurrency and how long it sends).
func (e *Engine) clients(spec workload.Spec, opt sim.RunOptions) sim.RunOptions {
	opt.FrontEnd = e.FrontEnd(spec.Endpoint)
	opt.Concurrency = spec.Concurrency
	if spec.Concurrency > 0 && spec.Duration > 0 {
		opt.SendUntil = spec.Duration
	}
	return opt
}

// RunFleet simulates spec's traffic on opt.Replicas replicas of the
// engine behind opt.Router (sim.RunFleet), each with its own API server.
func (e *Engine) RunFleet(ctx context.Context, files Files, spec workload.Spec, opt sim.FleetOptions) (*sim.FleetReport, string, error) {
	if e.Config.NumGPUBlocks < 2 {
		return nil, "", ErrNoKV
	}
	st, closer, err := spec.Open(files.open)
	if err != nil {
		return nil, "", err
	}
	defer closer.Close()
	opt.RunOptions = e.clients(spec, opt.RunOptions)
	opt.Engines = e.Budget.Settings.DataParallelSize
	rep, err := sim.RunFleet(ctx, e.Config, sim.FromWorkload(st), opt)
	return rep, workload.LogNote(st), err
}

// stepTimer builds the step time of a plan: the roofline with the
// calibration (its measured steps fitted, which it returns), or a fixed
// time.
func stepTimer(spec string, b memory.Budget, cal calibration) (sim.StepTimer, string, sim.Calibration, error) {
	if spec == "" || spec == "roofline" {
		c := cal.Calibration
		m, err := sim.RooflineFor(b, c)
		if err != nil {
			return nil, "", c, err
		}
		if len(cal.samples) > 0 {
			c = sim.Fit(*m, c, cal.samples)
			c.Source += " in " + cal.file
			if m, err = sim.RooflineFor(b, c); err != nil {
				steps := fmt.Sprintf("its %d measured steps fit", len(cal.samples))
				if len(cal.samples) == 1 {
					steps = "its measured step fits"
				}
				return nil, "", c, fmt.Errorf("--calibration %s: %s no step time a GPU could have (%v): check their seconds and batches", cal.file, steps, err)
			}
		}
		return m, "roofline (" + c.String() + ")", c, nil
	}
	if v, ok := strings.CutPrefix(spec, "fixed:"); ok {
		d, err := time.ParseDuration(v)
		if err == nil && d > 0 {
			return sim.Fixed(d.Seconds()), spec, cal.Calibration, nil
		}
	}
	return nil, "", cal.Calibration, fmt.Errorf("--step-time %q: use roofline or fixed:DURATION (e.g. fixed:10ms)", spec)
}

// calibration is a calibration file's content for one GPU: a correction,
// and measured steps to fit one to.
type calibration struct {
	sim.Calibration
	samples []sim.Sample
	file    string
}

// StepCalibrationPath is where loadtest appends the step-time corrections
// it fits: beside the probe's calibration.jsonl, in the user's cache.
func StepCalibrationPath(getenv func(string) string) (string, error) {
	p, err := probe.CalibrationPath(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "step-calibration.jsonl"), nil
}

// userCalibration is the calibration of a device without --calibration:
// the corrections loadtest wrote for it, said in a note, else the device's
// own (sim.CalibrationFor). A file that does not read is a note, not a
// failure: the user did not name it.
func userCalibration(env Env, files Files, dev gpu.Device) (calibration, string) {
	base, fitted := sim.CalibrationFor(dev)
	none := calibration{Calibration: base}
	note := ""
	if !fitted {
		note = fmt.Sprintf("step time: no serving run was fitted on %s; its datasheet peaks at default shares (%s)", dev.Name, base.Source)
	}
	if env.Getenv == nil {
		return none, note
	}
	path, err := StepCalibrationPath(env.Getenv)
	if err != nil {
		return none, note
	}
	// Through files, not the disk: a server's NoFiles reads none.
	f, err := files.open(path)
	if err != nil {
		return none, note
	}
	f.Close()
	cal, err := CalibrationFile(files, path, dev)
	if err != nil {
		return none, fmt.Sprintf("step-time calibration not read: %v", err)
	}
	if cal.Calibration == base && len(cal.samples) == 0 {
		return cal, note
	}
	what := cal.Source
	if len(cal.samples) > 0 {
		what = fmt.Sprintf("%d measured steps", len(cal.samples))
	}
	return cal, fmt.Sprintf("step time calibrated by %s (%s); --calibration FILE to use another", path, what)
}

// maxCalibrationFile bounds a calibration file.
const maxCalibrationFile = 16 << 20

// CalibrationFile reads JSON lines of two kinds: corrections (sim.Calibration's
// fields, any of them; the last line for the device, or for any device
// when it names none, wins, over the device's own calibration) and
// measured steps {"gpu", "batch": {...}, "seconds"} (sim.Sample), which
// sim.Fit turns into a correction on top.
//
// A kernel table written by bench/gpu-kernels (sim.KernelTable) is read as
// the device's calibration instead; a table measured on another GPU is
// refused.
func CalibrationFile(files Files, name string, dev gpu.Device) (calibration, error) {
	base, fitted := sim.CalibrationFor(dev)
	cal := calibration{Calibration: base, file: name}
	f, err := files.open(name)
	if err != nil {
		return cal, fmt.Errorf("--calibration: %v", unwrapPath(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCalibrationFile+1))
	if err != nil || len(data) > maxCalibrationFile {
		return cal, fmt.Errorf("--calibration %s: unreadable or over %d MiB", name, maxCalibrationFile>>20)
	}
	if sim.IsKernelTable(data) {
		t, err := sim.ReadKernelTable(bytes.NewReader(data))
		if err != nil {
			return cal, fmt.Errorf("--calibration %s: %v", name, err)
		}
		// Its shares are the seconds of the GPU it ran on over the
		// datasheet of this one: another GPU's table would read an H200's
		// GEMMs as 2.7 times an L40S's peak. A name no catalog GPU
		// answers to (a worked example) cannot be checked and is taken.
		if sel, err := gpu.Resolve(t.GPU); err == nil && sel.Device.Name != dev.Name {
			return cal, fmt.Errorf("--calibration %s: a kernel table of %s (%s), not of %s: its shares are that GPU's; run bench/gpu-kernels/gpu_kernels.py on the %s, or pass --gpu %s", name, t.GPU, sel.Device.Name, dev.Name, dev.Name, sel.Device.Name)
		}
		cal.Calibration = t.Calibration(dev, base, fitted)
		return cal, nil
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		rec := struct {
			sim.Calibration
			sim.Sample
		}{Calibration: base}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return cal, fmt.Errorf("--calibration %s line %d: %v", name, i+1, err)
		}
		if rec.GPU != "" && !strings.EqualFold(rec.GPU, dev.Name) {
			continue
		}
		if rec.Seconds > 0 {
			cal.samples = append(cal.samples, rec.Sample)
			continue
		}
		// A line with a batch or seconds is a measured step, and a step
		// of -1 s or 0 s was measured wrong: it was taken as a
		// correction line and dropped without a word.
		var step struct {
			Batch   *json.RawMessage `json:"batch"`
			Seconds *float64         `json:"seconds"`
		}
		if json.Unmarshal([]byte(line), &step) == nil && (step.Batch != nil || step.Seconds != nil) {
			return cal, fmt.Errorf("--calibration %s line %d: a measured step of %g s: give the seconds it took, more than 0", name, i+1, rec.Seconds)
		}
		if err := rec.Calibration.Check(); err != nil {
			return cal, fmt.Errorf("--calibration %s line %d: %v (or give a measured step {batch, seconds})", name, i+1, err)
		}
		if rec.Calibration.Source == "" || rec.Calibration.Source == base.Source {
			rec.Calibration.Source = fmt.Sprintf("%s line %d", name, i+1)
		}
		cal.Calibration = rec.Calibration
	}
	return cal, nil
}

// unwrapPath drops the "open " of a path error: "x.json: no such file".
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}
