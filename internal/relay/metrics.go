package relay

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry is the process's registry: the Go and process collectors
// and xds_relay_build_info{version, go_version} 1. New registers every
// component's metrics on it. Every xds_relay_ metric is in docs/metrics.md
// (checked by docs/metrics_test.go).
func NewRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "xds_relay",
		Name:      "build_info",
		Help:      "Always 1; labels give the relay's version and the Go version it was built with.",
	}, []string{"version", "go_version"})
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo,
	)
	return reg
}

// metrics are the process-level series; components register their own.
type metrics struct {
	// ready is 1 while the relay serves and passes its readiness checks.
	ready prometheus.Gauge
	// reloads counts config reloads by result: ok, invalid (refused: does
	// not validate, or changes a field that needs a restart), untrusted
	// and too_large (the file itself refused, unparsed: not a regular
	// file, owner or mode; over config.MaxFileBytes), error (the file
	// could not be read, or applying failed and was undone).
	reloads *prometheus.CounterVec
	// lastReloadSuccess is when the running config was loaded (start, or
	// the last reload that applied), in Unix seconds.
	lastReloadSuccess prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay",
			Name:      "ready",
			Help:      "1 while the relay is serving, 0 while starting or shutting down.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay",
			Name:      "config_reloads_total",
			Help:      "Config reloads (SIGHUP, POST /debug/reload, config_watch) by result: ok, invalid (refused, the running config kept), untrusted or too_large (the file refused unparsed), error.",
		}, []string{"result"}),
		lastReloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay",
			Name:      "config_last_reload_success_timestamp_seconds",
			Help:      "When the running config was loaded: the start, or the last reload that applied (Unix seconds).",
		}),
	}
	for _, result := range []string{reloadOK, reloadInvalid, reloadUntrusted, reloadTooLarge, reloadError} {
		m.reloads.WithLabelValues(result)
	}
	if reg != nil {
		reg.MustRegister(m.ready, m.reloads, m.lastReloadSuccess)
	}
	return m
}
