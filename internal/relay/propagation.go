package relay

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/admin"
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
		ReportAfter: cfg.Propagation.ReportAfter, PagePath: admin.PropagationPath})
	r.goRun(l.Run)
	return l
}
