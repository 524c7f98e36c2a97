package relay

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
)

// buildLedger builds the propagation ledger (internal/propagation) when
// propagation.enabled: the cache records each origin change in it, the
// sessions settle the records, and its log loop is one of the relay's
// goroutines. Nil when off.
func (r *Relay) buildLedger(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer) *propagation.Ledger {
	if !cfg.Propagation.Enabled {
		return nil
	}
	l := propagation.New(propagation.Options{Logger: lg, Registry: reg, Authorities: cfg.AuthorityNames(),
		ReportAfter: cfg.Propagation.ReportAfter})
	r.goRun(l.Run)
	return l
}

// addPropagationPages mounts the ledger's pages on admin: the latest
// changes (propagation.Path) and one node's streams (ClientPath).
func (r *Relay) addPropagationPages(l *propagation.Ledger, ds *downstream.Server) {
	r.admin.handle(propagation.Path, "the latest origin changes and their convergence: ACKed, NACKed (why), pending, p50/p99 (JSON; ?authority= ?type= ?limit= ?buckets=1)",
		jsonPage(propagation.Path, func(req *http.Request, h http.Header) (any, error) {
			q, err := propagationQuery(req)
			if err != nil {
				return nil, pageError{http.StatusBadRequest, err}
			}
			h.Set("Cache-Control", "no-store")
			return l.Page(q), nil
		}))
	r.admin.handle(propagation.ClientPath, "why is this client behind: per resource of a node's streams, the version sent, ACKed and newest, and why they differ (JSON; ?node=ID)",
		jsonPage(propagation.ClientPath, func(req *http.Request, h http.Header) (any, error) {
			node := req.URL.Query().Get("node")
			if node == "" {
				return nil, pageError{http.StatusBadRequest, errNoNode}
			}
			h.Set("Cache-Control", "no-store")
			return ds.ClientProgress(node), nil
		}))
}

// propagationQuery reads propagation.Path's query.
func propagationQuery(req *http.Request) (propagation.PageQuery, error) {
	v := req.URL.Query()
	q := propagation.PageQuery{Authority: v.Get("authority"), Type: v.Get("type"), Detail: v.Get("buckets") == "1"}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, errBadLimit
		}
		q.Limit = n
	}
	return q, nil
}
