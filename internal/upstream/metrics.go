package upstream

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the upstream Prometheus instruments. xds_relay_upstream_streams
// is a fixed name: operators scrape it.
type metrics struct {
	streams    *prometheus.GaugeVec   // label authority: connected streams
	reconnects *prometheus.CounterVec // label authority
	failbacks  *prometheus.CounterVec // label authority
	responses  *prometheus.CounterVec // label type (xdstype.Label)
	nacks      *prometheus.CounterVec // label type (xdstype.Label)
	fileErrors *prometheus.CounterVec // label authority
	// refusedTypes: labels authority, type (xdstype.Label).
	refusedTypes *prometheus.CounterVec
	idleCloses   *prometheus.CounterVec // label authority
	// responseTimeouts: label authority.
	responseTimeouts *prometheus.CounterVec
	// originCheckFailures: label authority (origincheck.go).
	originCheckFailures *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "streams",
			Help: "Upstream streams currently connected to an origin, by authority.",
		}, []string{"authority"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "reconnects_total",
			Help: "Upstream streams lost or failed to open, followed by a reconnect attempt, by authority.",
		}, []string{"authority"}),
		failbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "failbacks_total",
			Help: "Streams moved back to their authority's first origin after it answered a probe, by authority.",
		}, []string{"authority"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "responses_total",
			Help: "Responses received from origins, by resource type.",
		}, []string{"type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "nacks_total",
			Help: "Origin responses the relay rejected (NACKed), by resource type.",
		}, []string{"type"}),
		fileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Name: "file_source_errors_total",
			Help: "Files of a file source that could not be read or parsed (skipped, last good version kept), by authority.",
		}, []string{"authority"}),
		refusedTypes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "refused_types_total",
			Help: "Upstream streams an origin ended over a type the relay asked for; the type is answered as absent for upstream.failback_interval, by authority and type.",
		}, []string{"authority", "type"}),
		idleCloses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "idle_closes_total",
			Help: "Upstream links closed because no client watched any of their keys for upstream.idle_timeout, by authority.",
		}, []string{"authority"}),
		responseTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "response_timeouts_total",
			Help: "Upstream streams failed over because the origin did not answer within upstream.response_timeout, by authority.",
		}, []string{"authority"}),
		originCheckFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "origin_check_failures_total",
			Help: "Checks of an origin (resolve and connect, or a file source's directory) that failed, at start, after a reload or after an attempt that got no answer, by authority.",
		}, []string{"authority"}),
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.reconnects, m.failbacks, m.responses, m.nacks, m.fileErrors, m.refusedTypes, m.idleCloses, m.responseTimeouts, m.originCheckFailures)
	}
	return m
}
