package relay

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the process-level series; components register their own.
type metrics struct {
	// ready is 1 while the relay serves and passes its readiness checks.
	ready prometheus.Gauge
	// adminRequests counts admin HTTP requests by endpoint and status code.
	adminRequests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay",
			Name:      "ready",
			Help:      "1 while the relay is serving, 0 while starting or shutting down.",
		}),
		adminRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay",
			Name:      "admin_requests_total",
			Help:      "Admin HTTP requests by endpoint and status code.",
		}, []string{"handler", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.ready, m.adminRequests)
	}
	return m
}
