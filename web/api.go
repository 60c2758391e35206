package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/internal/report"
)

type api struct {
	opt Options
	// cluster is nil unless Options.Audit is set.
	cluster *clusterAudit
	// sims admits simulations, work the plans and the doctor (see
	// Budget).
	sims, work *graceful.Gate
}

// enter admits a request through g before its body is read; it answers
// the request itself when it cannot.
func (a *api) enter(w http.ResponseWriter, r *http.Request, g *graceful.Gate) (func(), bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST with a JSON body")
		return nil, false
	}
	release, err := g.EnterFrom(r.Context(), graceful.ClientOf(r))
	if err != nil {
		code := graceful.Status(err)
		w.Header().Set("Retry-After", "5")
		a.fail(w, r, code, err)
		return nil, false
	}
	return release, true
}

func (a *api) plan(w http.ResponseWriter, r *http.Request) {
	release, ok := a.enter(w, r, a.work)
	if !ok {
		return
	}
	defer release()
	body, ok := readBody(w, r, maxPlanBody)
	if !ok {
		return
	}
	p, err := decodePlan(body)
	if err != nil {
		a.decodeFailed(w, r, maxPlanBody, err)
		return
	}
	p.req.Offline = p.req.Offline || a.opt.Offline
	e, err := report.Gather(r.Context(), a.opt.Env, p.req)
	if err != nil {
		a.fail(w, r, http.StatusBadRequest, err)
		return
	}
	var v any
	switch {
	case p.upgrade != nil:
		v, err = report.Upgrade(e, p.upgrade.to, p.upgrade.maxLoss)
	case p.req.AllGPUs:
		v, err = report.AllGPUs(e, p.opt)
	default:
		v, err = report.Build(e, p.opt)
	}
	if err != nil {
		a.fail(w, r, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *api) doctor(w http.ResponseWriter, r *http.Request) {
	release, ok := a.enter(w, r, a.work)
	if !ok {
		return
	}
	defer release()
	body, ok := readBody(w, r, maxDoctorBody)
	if !ok {
		return
	}
	d, err := decodeDoctor(body)
	if err != nil {
		a.decodeFailed(w, r, maxDoctorBody, err)
		return
	}
	d.req.Offline = d.req.Offline || a.opt.Offline
	var inputs []report.Input
	if strings.TrimSpace(d.text) != "" {
		inputs = append(inputs, report.Input{Name: "pasted", Open: func() (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(d.text)), nil
		}})
	}
	diag, err := report.Diagnose(r.Context(), a.opt.Env, d.req, d.policy, inputs)
	switch {
	case errors.Is(err, report.ErrNoEvidence):
		a.fail(w, r, http.StatusBadRequest, errors.New("no evidence: paste a CUDA OOM message, vLLM logs, nvidia-smi output, /metrics text or a Kubernetes manifest"))
		return
	case errors.Is(err, report.ErrNothingRecognised):
		a.fail(w, r, http.StatusBadRequest, errors.New("nothing recognised in the pasted text: paste a CUDA OOM message, vLLM logs, nvidia-smi output, /metrics text, request logs or a Kubernetes manifest"))
		return
	case err != nil:
		a.fail(w, r, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, diag)
}

func (a *api) gpus(w http.ResponseWriter, r *http.Request) {
	if !isGet(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, report.GPUs())
}

func (a *api) models(w http.ResponseWriter, r *http.Request) {
	if !isGet(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, report.Models())
}

func (a *api) simulate(w http.ResponseWriter, r *http.Request) {
	release, ok := a.enter(w, r, a.sims)
	if !ok {
		return
	}
	defer release()
	body, ok := readBody(w, r, maxPlanBody)
	if !ok {
		return
	}
	req, err := decodeSimulate(body)
	if err != nil {
		a.decodeFailed(w, r, maxPlanBody, err)
		return
	}
	req.Engine.Plan.Offline = req.Engine.Plan.Offline || a.opt.Offline
	req.Engine.MaxKVBlocks = maxSimBlocks
	a.timed(w, r, "the simulation ran past this server's limit of %s a request: lower rate or duration_s, or run `headroom simulate`", func(ctx context.Context) (any, error) {
		return report.Simulate(ctx, a.opt.Env, report.NoFiles, req)
	})
}

// timed runs a simulation under the server's time limit and answers with
// its report. The simulation checks its context as it steps: the deadline
// stops it, not only the socket's write timeout, which would let it run on
// for as long as the client waits. past is the 422's message, with %s for
// the limit.
func (a *api) timed(w http.ResponseWriter, r *http.Request, past string, run func(context.Context) (any, error)) {
	a.timedFor(w, r, a.opt.simTime(), past, run)
}

// timedFor is timed with its own limit.
func (a *api) timedFor(w http.ResponseWriter, r *http.Request, limit time.Duration, past string, run func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeoutCause(r.Context(), limit, errSimTime)
	defer cancel()
	out, err := run(ctx)
	switch {
	case err != nil && errors.Is(context.Cause(ctx), errSimTime):
		a.fail(w, r, http.StatusUnprocessableEntity, fmt.Errorf(past, limit))
		return
	case err != nil && errors.Is(err, report.ErrTooManyBlocks):
		a.fail(w, r, http.StatusUnprocessableEntity, err)
		return
	case err != nil:
		a.fail(w, r, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// capacity answers POST /api/capacity with what `headroom capacity -o
// json` prints, also when no option meets the SLO (best is then empty).
// It is admitted and bounded as a simulation, and timed by CapacityTime:
// a day of traffic fits (its write deadline is extended past the limit).
func (a *api) capacity(w http.ResponseWriter, r *http.Request) {
	release, ok := a.enter(w, r, a.sims)
	if !ok {
		return
	}
	defer release()
	body, ok := readBody(w, r, maxPlanBody)
	if !ok {
		return
	}
	req, err := decodeCapacity(body)
	if err != nil {
		a.decodeFailed(w, r, maxPlanBody, err)
		return
	}
	req.Engine.Plan.Offline = req.Engine.Plan.Offline || a.opt.Offline
	req.Engine.MaxKVBlocks = maxSimBlocks
	limit := a.opt.capacityTime()
	// The server's write timeout (60 s) is for every other request; this
	// one's answer may take minutes. Where the writer cannot extend it
	// (a test's recorder), the server's stands.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(limit + 10*time.Second))
	a.timedFor(w, r, limit, "the sizing ran past this server's limit of %s a request: lower the rates or duration_s, or run `headroom capacity`", func(ctx context.Context) (any, error) {
		out, err := report.Capacity(ctx, a.opt.Env, report.NoFiles, req)
		// No option meeting the SLO is an answer, not a failure.
		var ue *report.UnreachableError
		if errors.As(err, &ue) {
			return ue.Report, nil
		}
		return out, err
	})
}

// errSimTime ends a simulation at Options.SimulationTime.
var errSimTime = errors.New("simulation time limit")

func (a *api) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	msg := oneLine(err.Error())
	if a.opt.Log != nil {
		a.opt.Log.Info("request refused", "path", r.URL.Path, "status", code, "error", msg)
	}
	writeError(w, code, msg)
}

// readBody is a POST body of at most limit bytes, to be decoded as it
// is read; a Content-Length past the limit is answered 413 at once.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (io.Reader, bool) {
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, "request body over "+humanBytes(limit)+": send less")
		return nil, false
	}
	// The body holds a slot while it arrives: it must keep coming (graceful.TimedBody).
	return graceful.TimedBody(w, http.MaxBytesReader(w, r.Body, limit)), true
}

// decodeFailed answers a body that did not decode: 413 past its bound,
// else 400.
func (a *api) decodeFailed(w http.ResponseWriter, r *http.Request, limit int64, err error) {
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "request body over "+humanBytes(limit)+": send less")
		return
	}
	if errors.Is(err, graceful.ErrSlowBody) {
		a.fail(w, r, http.StatusRequestTimeout, err)
		return
	}
	a.fail(w, r, http.StatusBadRequest, err)
}

func isGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "use GET")
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, v); err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer: "+oneLine(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// apiError is every error answer: {"error": "one line"}.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	var buf bytes.Buffer
	report.WriteJSON(&buf, apiError{Error: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func humanBytes(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
