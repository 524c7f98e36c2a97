package csds

import "github.com/prometheus/client_golang/prometheus"

// Method label values of xds_relay_csds_requests_total.
const (
	methodFetch  = "fetch"
	methodStream = "stream"
	methodDebug  = "debug" // GET /debug/csds
)

type metrics struct {
	requests  *prometheus.CounterVec // by method
	truncated prometheus.Counter
	clients   prometheus.Counter
	denied    prometheus.Counter
	// streamsRefused: streams past a caller's bound (callers.go).
	streamsRefused prometheus.Counter
	// replaced: stream requests replaced by a newer one before their
	// answer was built (stream.go).
	replaced prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "csds", Name: "requests_total",
			Help: "Client status requests answered, by method (fetch, stream: one per request on the stream; debug: GET /debug/csds).",
		}, []string{"method"}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "csds", Name: "truncated_total",
			Help: "Client status responses cut at the per-response bounds (clients or resource entries).",
		}),
		clients: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "csds", Name: "clients_reported_total",
			Help: "Client configs put in client status responses, summed over responses.",
		}),
		denied: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "csds", Name: "denied_total",
			Help: "Client status calls refused (PermissionDenied) because the caller's certificate is not in csds_allow.",
		}),
		streamsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "csds", Name: "streams_refused_total",
			Help: "Client status streams refused (ResourceExhausted) because their caller already had csds_max_streams_per_caller open.",
		}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "csds", Name: "requests_replaced_total",
			Help: "Client status stream requests replaced by a newer request on the same stream before an answer was built for them (the caller sent faster than it read).",
		}),
	}
	for _, method := range []string{methodFetch, methodStream, methodDebug} {
		m.requests.WithLabelValues(method)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.truncated, m.clients, m.denied, m.streamsRefused, m.replaced)
	}
	return m
}
