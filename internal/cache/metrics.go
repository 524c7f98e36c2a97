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
	// refetches: label type; fetches of a do_not_cache key asked of the
	// origin again for a new watcher (refetch.go).
	refetches *prometheus.CounterVec
	// refetchesLimited: label type; new watchers of a do_not_cache key
	// that wait for a fetch in flight or delayed by refetch_interval
	// instead of causing one (refetch.go).
	refetchesLimited *prometheus.CounterVec
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
			Help: "Bytes the cached keys take, as cache.max_bytes counts them: bodies, names, wrapper fields, resource errors and a fixed overhead per revision.",
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
			Help: "Fetches of a do_not_cache resource asked of the origin again for a new watcher (instead of serving it from cache), at most one per name per cache.refetch_interval, by resource type.",
		}, []string{"type"}),
		refetchesLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "cache", Name: "refetches_limited_total",
			Help: "New watchers of a do_not_cache resource that waited for a fetch already asked, or for the next one cache.refetch_interval allows, instead of causing their own, by resource type.",
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
		m.refetchesLimited.WithLabelValues(t)
		m.fanout.WithLabelValues(t)
	}
	if reg != nil {
		reg.MustRegister(m.hits, m.misses, m.resources, m.bytes, m.evictions, m.expirations, m.refetches, m.refetchesLimited, m.fanout)
	}
	return m
}
