package sim

// maxPipelineStages bounds --pipeline-parallel-size: the batches one
// engine holds in flight.
const maxPipelineStages = 64

// Pipeline parallelism, as vLLM V1's engine core runs it
// (EngineCore.step_with_batch_queue): with --pipeline-parallel-size P it
// keeps up to P batches in flight. It schedules a batch and hands it to
// the first stage without waiting, then schedules the next at once, until
// P are in flight or nothing more can be scheduled; only then does it
// block on the oldest batch's results. The slowest stage (the most layers,
// or the last with the LM head: Roofline.PipelineShare) sets the pace. The scheduler advances a request's
// computed tokens when it schedules them (_update_after_schedule), so a
// decode whose token is still in flight has nothing to schedule and waits
// for its batch, while a long prompt's next chunk may go in the next
// batch. Each stage holds 1/P of the layers: a batch takes 1/P of its
// forward pass on each, plus the send of its activations to the next, and
// the stages work on consecutive batches at once. A running set therefore
// splits over the batches in flight, each of its requests advancing one
// token a pass through the whole pipeline, and P batches' tokens come out
// in about the time of one pass.
type pipeline struct {
	flight []flightBatch // oldest first
	// stageFree is when the first stage is done with the batches handed
	// to it; lastDone when the last stage finished the newest batch.
	stageFree, lastDone float64
}

// flightBatch is a batch in flight and when its results are out.
type flightBatch struct {
	entries []flightEntry
	doneAt  float64
}

// flightEntry is a request's tokens in a batch in flight: sample is set
// when they reach its end, so that the batch's results give it a token.
type flightEntry struct {
	r      *req
	epoch  uint32
	sample bool
}

// PipelineTimer is a timer that knows how a pass divides over pipeline
// stages: the slowest stage's share of it, and what handing a batch from
// one stage to the next takes (the roofline). Without one the stages are
// even and the sends free.
type PipelineTimer interface {
	PipelineShare(stages int) float64
	PipelineSend(b Batch) float64
}

// stepPipelined is Step with P > 1 stages. A step either schedules and
// hands over a batch, taking the engine core's CPU for it (the step ends
// when the core is free again), or, with P batches in flight or nothing to
// schedule, waits for the oldest batch and applies its results (the step
// ends when they are out). NoBatch marks the second kind, which a run does
// not count as a step of its own.
func (e *Engine) stepPipelined() StepResult {
	res := &e.res
	*res = StepResult{Events: res.Events[:0]}
	p := &e.pipe
	if !e.Busy() && len(p.flight) == 0 {
		if e.pending.len() == 0 {
			res.Idle, res.Start, res.End = true, e.now, e.now
			return *res
		}
		e.now = max(e.now, e.pending.front().Arrival)
	}
	if len(p.flight) < e.cfg.PipelineStages {
		b := e.begin()
		switch {
		case b.Tokens > 0:
			e.issue(b)
			e.completeDue()
			return *res
		case len(p.flight) == 0:
			// Nothing to run and nothing in flight: the engine core turns
			// over an empty step, as without stages.
			return e.end(e.price(b))
		}
	}
	res.Start = e.now
	res.NoBatch = true
	e.now = max(e.now, p.flight[0].doneAt)
	res.End = e.now
	e.completeDue()
	return *res
}

// issue hands the scheduled batch b to the first stage: each request's
// tokens count as computed now, the batch's results come out when the
// last stage has run it, and the step lasts the engine core's CPU for it.
// Async scheduling adds nothing here: the batch queue already runs the
// core beside the stages.
func (e *Engine) issue(b Batch) {
	res := &e.res
	p := &e.pipe
	n := float64(e.cfg.PipelineStages)
	gpu, cpu := e.cfg.Timer.StepTime(b), 0.0
	if e.parts != nil {
		parts := e.parts.Parts(b)
		gpu, cpu = parts.GPU(), parts.CPU
		// A stage's GPU does 1/P of the batch's work, beside the core's
		// CPU.
		cpuPart := parts.CPU
		parts.Scale(1 / n)
		parts.CPU, parts.Overlapped, parts.overlap = cpuPart, 0, true
		res.Parts, res.HasParts = parts, true
	}
	// The slowest stage sets the pace; a batch's results are out after
	// every stage has run it and handed it on.
	slowest, send := gpu/n, 0.0
	if t, ok := e.cfg.Timer.(PipelineTimer); ok {
		slowest, send = gpu*t.PipelineShare(e.cfg.PipelineStages), t.PipelineSend(b)
	}
	stage := slowest + send
	start := max(e.now, p.stageFree)
	p.stageFree = start + stage
	done := max(start+gpu+n*send, p.lastDone+stage)
	p.lastDone = done
	fb := flightBatch{doneAt: done}
	if k := len(p.flight); k < cap(p.flight) {
		// Reuse the entries of a batch that left the front.
		fb.entries = p.flight[:k+1][k].entries[:0]
	}
	for _, r := range e.sched {
		r.computed += r.sched
		fb.entries = append(fb.entries, flightEntry{r: r, epoch: r.epoch, sample: r.computed >= r.numTokens()})
		r.sched, r.schedIdx = 0, -1
	}
	e.sched = e.sched[:0]
	p.flight = append(p.flight, fb)
	e.now += cpu
	res.End = e.now
}

// completeDue applies the results of the batches whose last stage is done
// by now: every request whose tokens reached its end samples, unless it
// was preempted or dropped since (its epoch moved on).
func (e *Engine) completeDue() {
	res := &e.res
	p := &e.pipe
	done := false
	for len(p.flight) > 0 && p.flight[0].doneAt <= e.now {
		fb := p.flight[0]
		for _, en := range fb.entries {
			if en.sample && en.r.epoch == en.epoch && en.r.generated < en.r.OutputTokens && e.sample(en.r, res) {
				done = true
			}
		}
		// Keep the entries' storage at the back for a later batch.
		clear(fb.entries)
		copy(p.flight, p.flight[1:])
		p.flight[len(p.flight)-1] = flightBatch{entries: fb.entries[:0]}
		p.flight = p.flight[:len(p.flight)-1]
	}
	if done {
		e.removeFinished()
	}
}
