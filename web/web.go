// Package web serves headroom's planner, doctor and simulation as a web
// page: one binary, the page's files embedded, nothing fetched from
// elsewhere. Its JSON API under /api/ answers with the same bytes as the
// CLI's -o json for the same input, because both call package report.
//
// The server keeps a memory budget of 256 MiB by admitting work within it
// (see the constants below and docs/servers.md): simulations and reports
// through gates that refuse past their queues (429, 503), bodies decoded
// from the stream, a simulation bounded in KV blocks, requests and time
// (422 naming the bound), a panic answered 500.
package web

import (
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/internal/report"
)

//go:embed assets
var assets embed.FS

// Options configure the handler.
type Options struct {
	// Env is what building a report may touch: the environment (calibration
	// records, HF_TOKEN), the HTTP client for the Hub. Its FS is replaced by
	// report.NoFS: a request never reads the server's disk.
	Env report.Env
	// Offline never fetches models from the Hugging Face Hub.
	Offline bool
	// Audit, when set, serves the cluster's audit at /api/audit and the
	// cluster page (cluster.html); nil answers 404 there.
	Audit Auditor
	// AuditEvery is how long one audit answers before the next runs; 0 is
	// DefaultAuditEvery.
	AuditEvery time.Duration
	// Now is the clock of AuditEvery; nil is time.Now.
	Now func() time.Time
	// Log receives one line per failed request; nil logs nothing.
	Log *slog.Logger
	// Simulations, Plans and SimulationTime override the budget's
	// admission (DefaultSimulations, DefaultPlans, DefaultSimulationTime)
	// when > 0.
	Simulations, Plans int
	SimulationTime     time.Duration
	// CapacityTime overrides DefaultCapacityTime when > 0.
	CapacityTime time.Duration
}

// The server's memory budget is 256 MiB (the chart's limit for the
// cluster page, with GOMEMLIMIT at 200 MiB), kept by admitting work within
// it; docs/servers.md gives the arithmetic. Beyond a gate's queue a request
// gets 429 at once; one that waits past QueueWait gets 503; both carry
// Retry-After. A simulation runs at most SimulationTime (422 past it).
const (
	// DefaultSimulations run at once; each holds its KV pool (at most
	// maxSimBlocks blocks), its requests in flight and its report.
	DefaultSimulations = 2
	// DefaultPlans are plans and doctor reports at once: a doctor holds
	// its pasted text (up to 4 MiB) and what it parses from it.
	DefaultPlans = 2
	// QueueFactor is how many wait per slot.
	QueueFactor = 4
	// QueueWait is the longest a request waits for a slot; a simulation
	// waits at most its SimulationTime if that is shorter.
	QueueWait = 20 * time.Second
	// DefaultSimulationTime bounds one simulation's compute: with
	// QueueWait it stays under the write timeout (60 s).
	DefaultSimulationTime = 30 * time.Second
	// DefaultCapacityTime bounds one capacity request's compute. Sizing
	// a day replays it through fleets several times: the day of
	// docs/capacity.md's benchmark, two GPU options, takes about a minute
	// of CPU. Its handler extends its own write deadline past this, so the
	// answer of a day gets written (other requests keep the server's 60 s).
	DefaultCapacityTime = 5 * time.Minute
)

func (o Options) capacityTime() time.Duration {
	if o.CapacityTime > 0 {
		return o.CapacityTime
	}
	return DefaultCapacityTime
}

func (o Options) simTime() time.Duration {
	if o.SimulationTime > 0 {
		return o.SimulationTime
	}
	return DefaultSimulationTime
}

// Body limits: a config.json is tens of KiB; pasted logs for the doctor
// are kept to what a browser text box holds comfortably.
const (
	maxPlanBody   = 1 << 20
	maxDoctorBody = 4 << 20
)

// contentSecurityPolicy allows the page's own files only: no inline
// scripts or styles, no other origins, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page and the API.
func Handler(opt Options) http.Handler {
	opt.Env.FS = report.NoFS
	if opt.Env.Getenv == nil {
		opt.Env.Getenv = func(string) string { return "" }
	}
	a := &api{opt: opt}
	sims, plans := opt.Simulations, opt.Plans
	if sims <= 0 {
		sims = DefaultSimulations
	}
	if plans <= 0 {
		plans = DefaultPlans
	}
	a.sims = graceful.NewGate("simulations", sims, QueueFactor*sims, min(QueueWait, opt.simTime()))
	a.work = graceful.NewGate("plans and doctor reports", plans, QueueFactor*plans, QueueWait)
	if opt.Audit != nil {
		a.cluster = &clusterAudit{run: opt.Audit, every: opt.AuditEvery, now: opt.Now}
		if a.cluster.every <= 0 {
			a.cluster.every = DefaultAuditEvery
		}
		if a.cluster.now == nil {
			a.cluster.now = time.Now
		}
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/plan", a.plan)
	mux.HandleFunc("/api/gpus", a.gpus)
	mux.HandleFunc("/api/models", a.models)
	mux.HandleFunc("/api/doctor", a.doctor)
	mux.HandleFunc("/api/simulate", a.simulate)
	mux.HandleFunc("/api/capacity", a.capacity)
	mux.HandleFunc("/api/audit", a.audit)
	noEndpoint := func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such API endpoint: use /api/plan, /api/gpus, /api/models, /api/doctor, /api/simulate, /api/capacity or /api/audit")
	}
	mux.HandleFunc("/api/", noEndpoint)
	files := http.FileServerFS(static)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "use GET for the page")
			return
		}
		files.ServeHTTP(w, r)
	})
	// The mux answers a path that is not clean ("/api/./plan") with a
	// redirect and no body, which an API client would not follow with its
	// POST: under /api/ such a path gets the JSON 404 instead (found by
	// FuzzHandler).
	routes := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; strings.HasPrefix(p, "/api/") && !clean(p) {
			noEndpoint(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return secure(graceful.Recover(routes, opt.Log, writeError))
}

// clean reports whether the mux would serve p as it is: path.Clean leaves
// it, keeping a trailing slash.
func clean(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// secure sets the headers every answer carries.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// NewServer is an http.Server for the handler with timeouts on every
// phase: a slow or stalled client cannot hold a connection. WriteTimeout
// leaves room for a model fetched from the Hub (its client gives up after
// 30 s).
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
