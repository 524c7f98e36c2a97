package admin

import "github.com/prometheus/client_golang/prometheus"

// metrics are the admin listener's series.
type metrics struct {
	// requests counts admin HTTP requests by endpoint and status code.
	requests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay",
			Name:      "admin_requests_total",
			Help:      "Admin HTTP requests by endpoint and status code.",
		}, []string{"handler", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests)
	}
	return m
}
