package downstream

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// metrics of the downstream side. Labels: variant is sotw/delta, type is
// typeLabel's, reason a short fixed word. No node ids or resource names.
type metrics struct {
	streams          *prometheus.GaugeVec   // variant
	requests         *prometheus.CounterVec // type
	responses        *prometheus.CounterVec // type
	nacks            *prometheus.CounterVec // type
	requestErrors    *prometheus.CounterVec // type, reason
	slowDisconnects  prometheus.Counter
	responseResource *prometheus.CounterVec // type
	sharedResponses  *prometheus.CounterVec // type
	limitRejections  *prometheus.CounterVec // limit (limits.go)
	accessDenied     *prometheus.CounterVec // type, authority (access.go)
	nodeDenied       prometheus.Counter     // access.go
	gatherExpired    *prometheus.CounterVec // type (gather.go)
	// resourceErrors: type, code (cache.CodeLabel): resource_errors sent
	// (resourceerrors.go).
	resourceErrors *prometheus.CounterVec
	// splitResponses: type; oversize: type, reason (sendlimit.go).
	splitResponses *prometheus.CounterVec
	oversize       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "streams",
			Help: "Open client streams by protocol variant (sotw, delta).",
		}, []string{"variant"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "requests_total",
			Help: "Discovery requests received from clients, by type URL.",
		}, []string{"type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "responses_total",
			Help: "Discovery responses sent to clients, by type URL.",
		}, []string{"type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "nacks_total",
			Help: "Responses a client rejected (NACK with error_detail), by type URL.",
		}, []string{"type"}),
		responseResource: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "resources_sent_total",
			Help: "Resources (including heartbeats) sent to clients, by type URL.",
		}, []string{"type"}),
		sharedResponses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "shared_responses_total",
			Help: "Responses sent from an origin change's shared encoding (the fan-out fast path), by type URL; a subset of responses_total.",
		}, []string{"type"}),
		gatherExpired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "gather_expired_total",
			Help: "Gather windows (downstream.gather_window) that passed before every name a request subscribed was resolved, by type URL: what was known went out, the rest as it came.",
		}, []string{"type"}),
		resourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "downstream", Name: "resource_errors_sent_total",
			Help: "Resource errors (resource_errors) sent to clients, the origins' and the relay's own, by type URL and code.",
		}, []string{"type", "code"}),
	}
	m.defineRefusals()
	m.defineSendLimit()
	m.zeroSeries()
	if reg != nil {
		reg.MustRegister(m.streams, m.requests, m.responses, m.nacks, m.requestErrors,
			m.slowDisconnects, m.responseResource, m.sharedResponses, m.limitRejections,
			m.accessDenied, m.nodeDenied, m.resourceErrors, m.gatherExpired,
			m.splitResponses, m.oversize)
	}
	return m
}

// defineRefusals defines the metrics of what the relay refused or cut off:
// requests and names it could not serve, slow clients, limits, access.
func (m *metrics) defineRefusals() {
	m.requestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "request_errors_total",
		Help: "Client requests (or names in them) the relay could not serve, by type URL and reason.",
	}, []string{"type", "reason"})
	m.slowDisconnects = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "slow_disconnects_total",
		Help: "Client streams ended with ResourceExhausted because a send did not complete within send_timeout.",
	})
	m.limitRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "limit_rejections_total",
		Help: "Client streams ended or refused for going past a downstream.limits bound, by limit (streams, names_per_stream, name_length, types_per_stream, version_length, groups_per_authority, new_groups_per_stream).",
	}, []string{"limit"})
	m.accessDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "access_denied_total",
		Help: "Subscriptions (names, globs, wildcards) and fetches refused by the access rules, by type URL and authority.",
	}, []string{"type", "authority"})
	m.nodeDenied = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "node_identity_denied_total",
		Help: "Streams and fetches refused because the node does not match the client certificate (downstream.node_identity).",
	})
}

// defineSendLimit defines the metrics of the send limit (sendlimit.go).
func (m *metrics) defineSendLimit() {
	m.splitResponses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "split_responses_total",
		Help: "Responses that would have been larger than downstream.max_send_msg_size, sent as several, by type URL.",
	}, []string{"type"})
	m.oversize = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "xds_relay", Subsystem: "downstream", Name: "oversize_total",
		Help: "What could not be sent within downstream.max_send_msg_size, by type URL and reason: resource (one resource larger than the limit, left out of a response), full_state (a SotW state-of-the-world response, not sent).",
	}, []string{"type", "reason"})
}

// The reason label values of xds_relay_downstream_oversize_total.
const (
	oversizeResource  = "resource"
	oversizeFullState = "full_state"
)

// zeroSeries makes every series whose label values are known at start
// exist from start, at zero; the authorities' come with setAuthorities.
func (m *metrics) zeroSeries() {
	for _, v := range []string{string(xdstype.SotW), string(xdstype.Delta)} {
		m.streams.WithLabelValues(v)
	}
	for _, t := range xdstype.Labels() {
		for _, c := range []*prometheus.CounterVec{m.requests, m.responses, m.nacks, m.responseResource, m.sharedResponses, m.gatherExpired} {
			c.WithLabelValues(t)
		}
		for _, r := range requestErrorReasons {
			m.requestErrors.WithLabelValues(t, r)
		}
		for _, c := range cache.CodeLabels() {
			m.resourceErrors.WithLabelValues(t, c)
		}
		m.splitResponses.WithLabelValues(t)
		for _, r := range []string{oversizeResource, oversizeFullState} {
			m.oversize.WithLabelValues(t, r)
		}
	}
	for _, l := range []string{limitStreams, limitNames, limitNameLength, limitTypes, limitVersion, limitGroupsPerAuthority, limitNewGroupsPerStream} {
		m.limitRejections.WithLabelValues(l)
	}
}

// The reason label values of xds_relay_downstream_request_errors_total.
const (
	reasonMalformedName    = "malformed_name"
	reasonNoRule           = "no_rule"
	reasonResolve          = "resolve"
	reasonUnknownAuthority = "unknown_authority"
	reasonTypeNotCarried   = "type_not_carried"
	reasonDynamicParams    = "dynamic_parameters"
)

var requestErrorReasons = []string{reasonMalformedName, reasonNoRule, reasonResolve, reasonUnknownAuthority, reasonTypeNotCarried, reasonDynamicParams}

// setAuthorities makes the series of the configured authorities exist, at
// zero, and deletes those of authorities no longer configured (prev).
func (m *metrics) setAuthorities(prev, next []string) {
	for _, a := range prev {
		if !slices.Contains(next, a) {
			m.accessDenied.DeletePartialMatch(prometheus.Labels{"authority": a})
		}
	}
	for _, a := range next {
		for _, t := range xdstype.Labels() {
			m.accessDenied.WithLabelValues(t, a)
		}
	}
}

// typeLabel is the type label of every downstream metric (xdstype.Label:
// a fixed set, whatever type URLs clients send).
func typeLabel(typeURL string) string { return xdstype.Label(typeURL) }
