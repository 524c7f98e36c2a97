package delivery

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// metrics are the delivery instruments. The held gauge is read from the
// cache at each scrape (heldCollector), so it is what the cache keeps held now.
type metrics struct {
	// invalid: labels authority, type.
	invalid *prometheus.CounterVec
	// breakerTrips: labels authority, type: versions the NACK breaker
	// held (breaker.go).
	breakerTrips *prometheus.CounterVec
	held         *heldCollector
}

func newMetrics(reg prometheus.Registerer, d *Delivery, authorities []string) *metrics {
	m := &metrics{
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "delivery", Name: "invalid_total",
			Help: "Origin resource versions refused as invalid (their proto's validation rules, delivery.validate): not cached nor sent, the origin NACKed; each version once, by authority and type.",
		}, []string{"authority", "type"}),
		breakerTrips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "xds_relay", Subsystem: "delivery", Name: "breaker_trips_total",
			Help: "Versions held by the NACK breaker (delivery.nack_breaker), by authority and type.",
		}, []string{"authority", "type"}),
		held: &heldCollector{d: d, desc: prometheus.NewDesc("xds_relay_delivery_held",
			"Versions or removals held back from clients now, by authority, type and reason (deletion_share, deletion_empty: removals held by delivery.deletion_guard; breaker: versions held by delivery.nack_breaker; wave: versions rolling out wave by wave, delivery.waves; wave_stalled: those whose rollout stopped).",
			[]string{"authority", "type", "reason"}, nil)},
	}
	m.setAuthorities(nil, authorities)
	if reg != nil {
		reg.MustRegister(m.invalid, m.breakerTrips, m.held)
	}
	return m
}

// setAuthorities makes the counters' series of the authorities in next
// exist, at zero, and deletes those of prev not in next. The held gauge
// follows the settings by itself.
func (m *metrics) setAuthorities(prev, next []string) {
	for _, a := range prev {
		if !slices.Contains(next, a) {
			m.invalid.DeletePartialMatch(prometheus.Labels{"authority": a})
			m.breakerTrips.DeletePartialMatch(prometheus.Labels{"authority": a})
		}
	}
	for _, a := range next {
		for _, t := range xdstype.Labels() {
			m.invalid.WithLabelValues(a, t)
			m.breakerTrips.WithLabelValues(a, t)
		}
	}
}

// heldCollector exports xds_relay_delivery_held from the cache's deferred
// removals at each scrape: a series per configured authority, type and
// reason, at zero when nothing is held.
type heldCollector struct {
	d    *Delivery
	desc *prometheus.Desc
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

type heldSeries struct{ authority, typ, reason string }

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	values := make(map[heldSeries]float64)
	for _, a := range c.d.settings.Load().authorities {
		for _, t := range xdstype.Labels() {
			for _, r := range Reasons() {
				values[heldSeries{a, t, r}] = 0
			}
		}
	}
	if c.d.held != nil {
		for _, h := range c.d.held.DeferredCounts() {
			s := heldSeries{h.Link.Authority, xdstype.Label(h.TypeURL), h.Reason}
			if _, configured := values[s]; configured {
				values[s] += float64(h.Count)
			}
		}
	}
	for s, n := range c.d.heldVersions() {
		if _, configured := values[s]; configured {
			values[s] += float64(n)
		}
	}
	for s, v := range values {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.authority, s.typ, s.reason)
	}
}

// heldVersions counts the versions held now, by authority, type and
// reason: those the breaker holds, and those of rollouts whose waves are
// not all open.
func (d *Delivery) heldVersions() map[heldSeries]int {
	out := make(map[heldSeries]int)
	d.mu.Lock()
	defer d.mu.Unlock()
	for v := range d.trips {
		out[heldSeries{v.key.Link.Authority, xdstype.Label(v.key.TypeURL), ReasonBreaker}]++
	}
	for ro := range d.rollouts {
		if ro.waves == nil || ro.open > len(ro.waves.waves) {
			continue
		}
		reason := ReasonWave
		if ro.stalled {
			reason = ReasonWaveStalled
		}
		for v := range ro.live {
			if v.trip == nil || v.released {
				out[heldSeries{ro.link.Authority, xdstype.Label(ro.typeURL), reason}]++
			}
		}
	}
	return out
}
