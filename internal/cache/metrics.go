package cache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// metrics are the cache's Prometheus instruments. Their names are fixed:
// operators scrape them. The type label is xdstype.Label's.
type metrics struct {
	hits      *prometheus.CounterVec // label type
	misses    *prometheus.CounterVec // label type
	resources prometheus.Gauge
	bytes     prometheus.Gauge
	evictions prometheus.Counter
	// expirations: label type.
	expirations *prometheus.CounterVec
	// refetches: label type; new watchers of a do_not_cache revision,
	// each a re-request of the key from the origin (fields.go).
	refetches *prometheus.CounterVec
	// fanout: label type; origin change arrival → last watcher's send.
	fanout *prometheus.HistogramVec
}

// newMetrics builds the cache metrics and registers them with reg (nil: not
// registered).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "hits_total",
			Help: "Subscriptions answered from the cache without waiting for the origin, by resource type.",
		}, []string{"type"}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "misses_total",
			Help: "Subscriptions that had to wait for the origin, by resource type.",
		}, []string{"type"}),
		resources: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "resources",
			Help: "Resources currently cached (present), watched or not.",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "bytes",
			Help: "Serialized bytes of the resources currently cached.",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "evictions_total",
			Help: "Unwatched keys evicted from the LRU (and unsubscribed upstream).",
		}),
		expirations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "expirations_total",
			Help: "Resources made absent because their TTL elapsed without an update or heartbeat, by resource type.",
		}, []string{"type"}),
		refetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "refetches_total",
			Help: "New watchers of a cached do_not_cache resource, each asked of the origin again instead of served from cache, by resource type.",
		}, []string{"type"}),
		fanout: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "xds_relay", Name: "fanout_duration_seconds",
			Help: "From an origin change's arrival at the relay to the last client's send of the response carrying it, by resource type.",
			// 1 ms to ~33 s.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"type"}),
	}
	// Every type's series exists from start, at zero.
	for _, t := range xdstype.Labels() {
		m.hits.WithLabelValues(t)
		m.misses.WithLabelValues(t)
		m.expirations.WithLabelValues(t)
		m.refetches.WithLabelValues(t)
		m.fanout.WithLabelValues(t)
	}
	if reg != nil {
		reg.MustRegister(m.hits, m.misses, m.resources, m.bytes, m.evictions, m.expirations, m.refetches, m.fanout)
	}
	return m
}

// snapshotMetrics are the Snapshotter's instruments (registered only when
// a snapshot path is configured).
type snapshotMetrics struct {
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
)

func newSnapshotMetrics(reg prometheus.Registerer, age func() float64) *snapshotMetrics {
	m := &snapshotMetrics{
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
	for _, r := range []string{skippedExpired, skippedOverBounds} {
		m.skipped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.loads, m.writes, m.restored, m.skipped, m.bytes, m.resources, m.writeDuration, ageFn)
	}
	return m
}
