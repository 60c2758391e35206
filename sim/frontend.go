package sim

import (
	"errors"

	"headroom.dev/headroom/workload"
)

// FrontEnd is the CPU time of vLLM's API server, the process between the
// client and the engine core: per request (HTTP, validation, the chat
// template, the engine's input processing), per prompt token (tokenizing)
// and per streamed token (detokenizing, the SSE chunk). The benchmark
// client's own per-request work is in the same figures, since a
// measurement cannot tell them apart.
//
// The API server is one Python event loop that interleaves every request
// it holds, so it is simulated as one CPU shared equally among them
// (processor sharing): a request's own work takes longer the more
// requests share the loop, and a burst of N requests finishes its input
// processing together, after N × Request. The engine's outputs are one
// more sharer: a step's tokens reach the clients when the loop has
// processed them, in step order. The engine core runs in its own process,
// so the API server delays what the client sees but never the engine's
// steps.
//
// Latency is a fixed delay of every request on its way in that takes no
// share of the server's CPU (the HTTP exchange, the hand-off to the engine
// core over its socket, the client's own start): requests in flight
// overlap it. A closed loop of one request pays it in full on every TTFT;
// a burst of a thousand barely notices it.
//
// Tokenizing (PromptToken a token) runs beside the loop, one prompt after
// another in the order the requests came (vLLM's tokenizer thread; for
// gpt-oss, harmony's renderer), before the request's share of the loop.
// So the loop's work is the same for every request of a burst, which
// then reaches the engine in the order it was sent: were the tokens part
// of the shared work, processor sharing would finish the shortest
// prompts first and hand a burst to the engine sorted by length, which
// no event loop does and which lets a KV-bound engine admit its short
// prompts first.
type FrontEnd struct {
	Latency     float64 `json:"frontend_latency_s,omitempty"`
	Request     float64 `json:"frontend_request_s,omitempty"`
	PromptToken float64 `json:"frontend_prompt_token_s,omitempty"`
	OutputToken float64 `json:"frontend_output_token_s,omitempty"`
	// ByEndpoint is the per-request cost of a request that names the
	// endpoint it calls (Request.Endpoint: a logged request's own), where
	// it differs from the traffic's (Calibration.FrontEndFor); Request is
	// the cost of a request that names none.
	ByEndpoint EndpointCosts `json:"-"`
	// StreamInterval is the serve line's --stream-interval: a request's
	// tokens reach its client every StreamInterval of them (stats.chunks);
	// 0 or 1, every token. A setting, not a cost: FrontEndFor takes it
	// from the settings, never from a calibration.
	StreamInterval int `json:"-"`
}

// EndpointCosts are the API server's CPU seconds for one request to each
// endpoint; 0 takes FrontEnd.Request.
type EndpointCosts struct {
	Chat, Completions float64
}

// requestCost is the API server's CPU for request r.
func (f FrontEnd) requestCost(r Request) float64 {
	switch {
	case r.Endpoint == workload.EndpointChat && f.ByEndpoint.Chat > 0:
		return f.ByEndpoint.Chat
	case r.Endpoint == workload.EndpointCompletions && f.ByEndpoint.Completions > 0:
		return f.ByEndpoint.Completions
	}
	return f.Request
}

// cpuTimes is f with every CPU time k times as long, the latency as it
// is: an API server whose CPU is shared k ways (data-parallel engines).
func (f FrontEnd) cpuTimes(k float64) FrontEnd {
	f.Request, f.PromptToken, f.OutputToken = k*f.Request, k*f.PromptToken, k*f.OutputToken
	f.ByEndpoint.Chat, f.ByEndpoint.Completions = k*f.ByEndpoint.Chat, k*f.ByEndpoint.Completions
	return f
}

func (f FrontEnd) check() error {
	if !(f.Latency >= 0 && f.Latency <= 60) || !(f.Request >= 0 && f.Request <= 60) || !(f.PromptToken >= 0 && f.PromptToken <= 1) || !(f.OutputToken >= 0 && f.OutputToken <= 1) {
		return errors.New("frontend_latency_s and frontend_request_s must be in [0, 60], frontend_prompt_token_s and frontend_output_token_s in [0, 1]")
	}
	return nil
}

// delivery is one engine step's output as the API server processes it.
type delivery struct {
	at   float64 // the step's end
	work float64
	// firsts are the step's first tokens; outputs the requests that
	// sampled, one chunk each (several tokens with accepted drafts);
	// tokens the tokens they sampled
	firsts, outputs, tokens int
	events                  []Event
}

// psJob is a request in input processing: done when the server's virtual
// time reaches finish.
type psJob struct {
	finish float64
	seq    uint64 // submission order: equal finishes complete first come, first served
	req    Request
}

func (a *psJob) before(b *psJob) bool {
	return a.finish < b.finish || (a.finish == b.finish && a.seq < b.seq)
}

// frontEnd is the processor-sharing server. Virtual time v is the service
// every job present has received: it grows at 1/n per second with n
// sharers, so a job needing w seconds of CPU, submitted at virtual time v0,
// completes when v reaches v0 + w, whatever else comes and goes.
type frontEnd struct {
	cost FrontEnd
	now  float64
	v    float64
	jobs []psJob // min-heap by finish
	seq  uint64
	// pending are the requests sent but still in Latency or the
	// tokenizer, in the order they are ready (sends come in time order,
	// Latency is one and the tokenizer first come first served).
	pending     []pendingReq
	pendingHead int
	// tokenizerFree is when the tokenizer, one worker beside the loop,
	// has tokenized every prompt handed to it.
	tokenizerFree float64
	// out is the FIFO of step outputs; the head completes at outFinish.
	out       []delivery
	outHead   int
	outFinish float64
}

// pendingReq is a request in the front end's fixed latency or its
// tokenizer.
type pendingReq struct {
	ready float64
	req   Request
}

func (f *frontEnd) sharers() int {
	n := len(f.jobs)
	if f.outHead < len(f.out) {
		n++
	}
	return n
}

// next is the real time of the next completion; ok is false when the
// server is empty.
func (f *frontEnd) next() (float64, bool) {
	t, ok := f.nextShared()
	if f.pendingHead < len(f.pending) {
		if r := f.pending[f.pendingHead].ready; !ok || r < t {
			return r, true
		}
	}
	return t, ok
}

// nextShared is next() of the processor-shared work alone.
func (f *frontEnd) nextShared() (float64, bool) {
	n := f.sharers()
	if n == 0 {
		return 0, false
	}
	fmin := f.nextFinish()
	return f.now + max(fmin-f.v, 0)*float64(n), true
}

func (f *frontEnd) nextFinish() float64 {
	fmin := f.outFinish
	if f.outHead >= len(f.out) {
		fmin = f.jobs[0].finish
	} else if len(f.jobs) > 0 {
		fmin = min(fmin, f.jobs[0].finish)
	}
	return fmin
}

// advance moves the server's clock to t, which must not pass next().
func (f *frontEnd) advance(t float64) {
	if t <= f.now {
		return
	}
	if n := f.sharers(); n > 0 {
		f.v += (t - f.now) / float64(n)
	}
	f.now = t
}

// submit starts a request's input processing: after the fixed latency
// and its tokenizing, first come first served, it takes its share of the
// loop.
func (f *frontEnd) submit(r Request) {
	if f.cost.Latency > 0 || f.cost.PromptToken > 0 {
		if f.pendingHead == len(f.pending) {
			f.pending, f.pendingHead = f.pending[:0], 0
		} else if f.pendingHead >= 64 && 2*f.pendingHead >= len(f.pending) {
			n := copy(f.pending, f.pending[f.pendingHead:])
			f.pending, f.pendingHead = f.pending[:n], 0
		}
		ready := max(f.now+f.cost.Latency, f.tokenizerFree) + f.cost.PromptToken*float64(r.PromptTokens)
		f.tokenizerFree = ready
		f.pending = append(f.pending, pendingReq{ready: ready, req: r})
		return
	}
	f.enter(r)
}

// enter puts a request on the shared CPU now.
func (f *frontEnd) enter(r Request) {
	w := f.cost.requestCost(r)
	f.seq++
	f.jobs = append(f.jobs, psJob{finish: f.v + w, seq: f.seq, req: r})
	f.up(len(f.jobs) - 1)
}

// push queues a step's output now; its events are copied.
func (f *frontEnd) push(res *StepResult, tokens, firsts int) {
	if f.outHead == len(f.out) {
		f.out, f.outHead = f.out[:0], 0
	} else if f.outHead >= 64 && 2*f.outHead >= len(f.out) {
		// A server that never empties: move the queue to the front. The
		// entries behind it are dropped, not reused: their event slices now
		// belong to the moved ones.
		n := copy(f.out, f.out[f.outHead:])
		clear(f.out[n:])
		f.out, f.outHead = f.out[:n], 0
	}
	var d *delivery
	if len(f.out) < cap(f.out) {
		f.out = f.out[:len(f.out)+1]
		d = &f.out[len(f.out)-1]
		d.events = d.events[:0]
	} else {
		f.out = append(f.out, delivery{})
		d = &f.out[len(f.out)-1]
	}
	d.at, d.work, d.firsts, d.outputs, d.tokens = res.End, f.cost.OutputToken*float64(tokens), firsts, res.Outputs, tokens
	for _, ev := range res.Events {
		if ev.First || ev.Done {
			d.events = append(d.events, ev)
		}
	}
	if f.outHead == len(f.out)-1 {
		f.outFinish = f.v + d.work
	}
}

// complete takes the next completion at time next(): a request whose
// input is done (in) or a step output delivered (out); neither when a
// request left the fixed latency for the shared CPU.
func (f *frontEnd) complete() (in *Request, out *delivery) {
	t, ok := f.nextShared()
	if f.pendingHead < len(f.pending) {
		if p := f.pending[f.pendingHead]; !ok || p.ready < t {
			f.advance(p.ready)
			f.pending[f.pendingHead] = pendingReq{}
			f.pendingHead++
			f.enter(p.req)
			return nil, nil
		}
	}
	fmin := f.nextFinish()
	f.now, f.v = t, max(f.v, fmin)
	if f.outHead < len(f.out) && f.outFinish <= fmin {
		d := &f.out[f.outHead]
		f.outHead++
		if f.outHead < len(f.out) {
			f.outFinish = f.v + f.out[f.outHead].work
		}
		return nil, d
	}
	r := f.jobs[0].req
	last := len(f.jobs) - 1
	f.jobs[0] = f.jobs[last]
	f.jobs = f.jobs[:last]
	if last > 0 {
		f.down(0)
	}
	return &r, nil
}

func (f *frontEnd) up(i int) {
	h := f.jobs
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (f *frontEnd) down(i int) {
	h := f.jobs
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
