package snapshot

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Snapshotter's instruments (registered only when
// a snapshot path is configured).
type metrics struct {
	// loads: label result (LoadResult).
	loads *prometheus.CounterVec
	// writes: label result: ok, truncated, error.
	writes *prometheus.CounterVec
	// restored: resources put back from the snapshot at start.
	restored prometheus.Gauge
	// skipped: label reason: expired, over_bounds.
	skipped *prometheus.CounterVec
	// bytes and resources of the last snapshot written.
	bytes     prometheus.Gauge
	resources prometheus.Gauge
	// writeDuration: collect, encode, write, sync and rename.
	writeDuration prometheus.Histogram
}

// The result label values of xds_relay_cache_snapshot_writes_total and the
// reason label values of xds_relay_cache_snapshot_skipped_total.
const (
	writeOK           = "ok"
	writeTruncated    = "truncated"
	writeError        = "error"
	skippedExpired    = "expired"
	skippedOverBounds = "over_bounds"
	// skippedOtherAuthority: a record whose name another authority owns
	// (cache.LinkID.Owns), which no origin of its link could have sent.
	skippedOtherAuthority = "other_authority"
)

func newMetrics(reg prometheus.Registerer, age func() float64) *metrics {
	m := &metrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_loads_total",
			Help: "Snapshot loads at start, by result: loaded, absent, corrupt, incompatible, foreign_config, too_large, untrusted, error.",
		}, []string{"result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_writes_total",
			Help: "Snapshot writes, by result: ok, truncated (cache.snapshot_max_bytes left resources out), error.",
		}, []string{"result"}),
		restored: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_restored_resources",
			Help: "Resources put back into the cache from the snapshot at start.",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_skipped_total",
			Help: "Snapshot entries not restored at start, by reason: expired (TTL lapsed), over_bounds (cache bounds full).",
		}, []string{"reason"}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_bytes",
			Help: "Size of the last snapshot written.",
		}),
		resources: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_resources",
			Help: "Resources in the last snapshot written.",
		}),
		writeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_write_duration_seconds",
			Help:    "Time to collect, encode and atomically write one snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	ageFn := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "xds_relay", Subsystem: "cache", Name: "snapshot_age_seconds",
		Help: "Age of the snapshot at the path: since the last successful write, or since the loaded one was written; -1 while there is none.",
	}, age)
	// Every result's and reason's series exists from start, at zero.
	for _, r := range []LoadResult{LoadLoaded, LoadAbsent, LoadCorrupt, LoadIncompatible, LoadForeign, LoadTooLarge, LoadUntrusted, LoadError} {
		m.loads.WithLabelValues(string(r))
	}
	for _, r := range []string{writeOK, writeTruncated, writeError} {
		m.writes.WithLabelValues(r)
	}
	for _, r := range []string{skippedExpired, skippedOverBounds, skippedOtherAuthority} {
		m.skipped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.loads, m.writes, m.restored, m.skipped, m.bytes, m.resources, m.writeDuration, ageFn)
	}
	return m
}
