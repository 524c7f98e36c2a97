package upstream

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// metrics are the upstream Prometheus instruments. xds_relay_upstream_streams
// is a fixed name: operators scrape it.
type metrics struct {
	streams    *prometheus.GaugeVec   // label authority: connected streams
	reconnects *prometheus.CounterVec // label authority
	failbacks  *prometheus.CounterVec // label authority
	responses  *prometheus.CounterVec // label type (xdstype.Label)
	// nacks: labels type (xdstype.Label), reason (nackInvalid,
	// nackOtherAuthority, nackBreaker).
	nacks      *prometheus.CounterVec
	fileErrors *prometheus.CounterVec // label authority
	// refusedTypes: labels authority, type (xdstype.Label).
	refusedTypes *prometheus.CounterVec
	idleCloses   *prometheus.CounterVec // label authority
	// responseTimeouts: label authority.
	responseTimeouts *prometheus.CounterVec
	// originCheckFailures: label authority (origincheck.go).
	originCheckFailures *prometheus.CounterVec
	// resourceErrors: labels authority, type (xdstype.Label), code
	// (cache.CodeLabel): resource_errors received from origins.
	resourceErrors *prometheus.CounterVec
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
			Help: "Origin responses the relay rejected (NACKed), by resource type and reason: invalid (duplicate names, wrong type, undecodable), other_authority (names another authority's resource) or breaker (the relay's NACK breaker holds versions its clients rejected).",
		}, []string{"type", "reason"}),
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
		resourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "upstream", Name: "resource_errors_total",
			Help: "Resource errors (resource_errors) received from origins in accepted responses, by authority, type and code.",
		}, []string{"authority", "type", "code"}),
	}
	// Every type's series exists from start, at zero; the authorities'
	// come with setAuthorities.
	for _, t := range xdstype.Labels() {
		m.responses.WithLabelValues(t)
		m.nacks.WithLabelValues(t, nackInvalid)
		m.nacks.WithLabelValues(t, nackOtherAuthority)
		m.nacks.WithLabelValues(t, nackBreaker)
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.reconnects, m.failbacks, m.responses, m.nacks, m.fileErrors, m.refusedTypes, m.idleCloses, m.responseTimeouts, m.originCheckFailures, m.resourceErrors)
	}
	return m
}

// authorityCounters are the counters whose only label is authority.
func (m *metrics) authorityCounters() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{m.reconnects, m.failbacks, m.fileErrors, m.idleCloses, m.responseTimeouts, m.originCheckFailures}
}

// setAuthorities makes the series of the authorities in next exist, at
// zero, and deletes those of the authorities of prev not in next. Call it
// once a removed authority's links have stopped (they update its series
// until then).
func (m *metrics) setAuthorities(prev, next []string) {
	for _, a := range prev {
		if slices.Contains(next, a) {
			continue
		}
		gone := prometheus.Labels{"authority": a}
		m.streams.DeletePartialMatch(gone)
		m.refusedTypes.DeletePartialMatch(gone)
		m.resourceErrors.DeletePartialMatch(gone)
		for _, c := range m.authorityCounters() {
			c.DeletePartialMatch(gone)
		}
	}
	for _, a := range next {
		m.streams.WithLabelValues(a)
		for _, c := range m.authorityCounters() {
			c.WithLabelValues(a)
		}
		for _, t := range xdstype.Labels() {
			m.refusedTypes.WithLabelValues(a, t)
			for _, c := range cache.CodeLabels() {
				m.resourceErrors.WithLabelValues(a, t, c)
			}
		}
	}
}

// countResourceErrors counts the resource errors of an accepted update.
func (m *metrics) countResourceErrors(authority string, u cache.Update) {
	if len(u.Errors) == 0 {
		return
	}
	t := xdstype.Label(u.TypeURL)
	for _, re := range u.Errors {
		m.resourceErrors.WithLabelValues(authority, t, cache.CodeLabel(re.Detail)).Inc()
	}
}
