package workload

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
)

// Trace is one request as its client lived it: the line `simulate
// --trace` and `loadtest --trace` write, so that a prediction and a
// measurement of one Spec compare request by request. Times are seconds
// from the start: Arrival when the client sent the request, Due when it
// was due where that differs (a closed loop, a late client), FirstToken and
// Finish when its first and last token arrived. Prompt and Output are the
// lengths asked for. Read back with Spec.Log, a trace replays the same
// requests at the times they were sent.
type Trace struct {
	ID          string   `json:"id"`
	Due         *float64 `json:"due_s,omitempty"`
	Arrival     float64  `json:"arrival_s"`
	FirstToken  float64  `json:"first_token_s"`
	Finish      float64  `json:"finish_s"`
	Prompt      int      `json:"prompt_tokens"`
	Output      int      `json:"output_tokens"`
	Preemptions int      `json:"preemptions"`
	Error       string   `json:"error,omitempty"`
}

// TraceWriter writes Trace lines, from any goroutine. A nil TraceWriter
// writes nothing.
type TraceWriter struct {
	mu  sync.Mutex
	wc  io.WriteCloser
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// NewTraceWriter writes to wc, which Close closes.
func NewTraceWriter(wc io.WriteCloser) *TraceWriter {
	w := bufio.NewWriterSize(wc, 1<<16)
	return &TraceWriter{wc: wc, w: w, enc: json.NewEncoder(w)}
}

// Write adds one line; the first error is kept for Close.
func (t *TraceWriter) Write(l Trace) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.enc.Encode(l); err != nil && t.err == nil {
		t.err = err
	}
}

// Close flushes and closes, returning the first error of any write.
func (t *TraceWriter) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.w.Flush()
	if cerr := t.wc.Close(); err == nil {
		err = cerr
	}
	if t.err != nil {
		err = t.err
	}
	return err
}
