package propagation

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// metrics of the ledger. Labels: authority (a configured authority's
// name) and type (xdstype.Label); never a node or a resource name.
type metrics struct {
	seconds *prometheus.HistogramVec // authority, type
	nacks   *prometheus.CounterVec   // authority, type
}

// secondsBuckets: arrival → ACK, from a loopback fan-out (milliseconds)
// to a fleet that takes minutes.
var secondsBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "xds_relay", Subsystem: "propagation", Name: "seconds",
			Help:    "From an origin change's arrival at the relay to each client stream's ACK of a response carrying it (or a later one of its type), by authority and type.",
			Buckets: secondsBuckets,
		}, []string{"authority", "type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "propagation", Name: "nacks_total",
			Help: "Client streams that NACKed a response carrying an origin change, by authority and type.",
		}, []string{"authority", "type"}),
	}
	if reg != nil {
		reg.MustRegister(m.seconds, m.nacks)
	}
	return m
}

// series returns a change's series.
func (m *metrics) series(authority, typeURL string) (prometheus.Observer, prometheus.Counter) {
	t := xdstype.Label(typeURL)
	return m.seconds.WithLabelValues(authority, t), m.nacks.WithLabelValues(authority, t)
}

// setAuthorities makes the series of the configured authorities exist, at
// zero, and deletes those of authorities no longer configured (prev).
func (m *metrics) setAuthorities(prev, next []string) {
	for _, a := range prev {
		if !slices.Contains(next, a) {
			m.seconds.DeletePartialMatch(prometheus.Labels{"authority": a})
			m.nacks.DeletePartialMatch(prometheus.Labels{"authority": a})
		}
	}
	for _, a := range next {
		for _, t := range xdstype.Labels() {
			m.seconds.WithLabelValues(a, t)
			m.nacks.WithLabelValues(a, t)
		}
	}
}
