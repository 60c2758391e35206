package web

import (
	"context"
	"net/http"
	"sync"
	"time"

	"headroom.dev/headroom/audit"
)

// Auditor audits the cluster the server was started for (`headroom serve
// --cluster`): the report `headroom audit -o json` prints for the same
// cluster and options.
type Auditor func(ctx context.Context) (audit.Report, error)

// DefaultAuditEvery is how long an audit answers /api/audit before the
// next one runs: a page left open, or many open at once, read the cluster
// (its lists and every pod's /metrics) at most this often.
const DefaultAuditEvery = 10 * time.Second

// clusterAudit runs the auditor at most once per interval; requests that
// arrive while an audit runs wait for it and share its answer.
type clusterAudit struct {
	run   Auditor
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	at   time.Time
	last *audit.Report
}

func (c *clusterAudit) report(ctx context.Context) (audit.Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && c.now().Sub(c.at) < c.every {
		return *c.last, nil
	}
	r, err := c.run(ctx)
	if err != nil {
		return audit.Report{}, err
	}
	c.last, c.at = &r, c.now()
	return r, nil
}

// audit answers GET /api/audit with the cluster's audit.
func (a *api) audit(w http.ResponseWriter, r *http.Request) {
	if !isGet(w, r) {
		return
	}
	if a.cluster == nil {
		writeError(w, http.StatusNotFound, "this server sees no cluster: start it with headroom serve --cluster")
		return
	}
	rep, err := a.cluster.report(r.Context())
	if err != nil {
		a.fail(w, r, http.StatusBadGateway, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
