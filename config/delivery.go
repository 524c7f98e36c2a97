package config

import (
	"strconv"
	"time"
)

// DefaultDelivery is the delivery section's defaults: validation on, the
// deletion guard at half of a type's resources, released only by hand,
// the NACK breaker at 3 clients, no waves.
func DefaultDelivery() Delivery {
	return Delivery{
		Validate: true,
		DeletionGuard: DeletionGuard{
			MaxRemovedShare: DefaultMaxRemovedShare,
			MinResources:    DefaultMinResources,
		},
		NackBreaker: NackBreaker{Clients: DefaultNackBreakerClients},
		AckShare:    DefaultAckShare,
		MaxWait:     DefaultMaxWait,
	}
}

// DeliveryOf is the delivery settings of authority name: the top-level
// section with the keys its authorities[].delivery sets replaced. An
// authority not configured gets the top-level section.
func (c *Config) DeliveryOf(name string) Delivery {
	d := c.Delivery
	a, ok := c.Authority(name)
	if !ok {
		return d
	}
	o := a.Delivery
	set(&d.Validate, o.Validate)
	set(&d.DeletionGuard.MaxRemovedShare, o.DeletionGuard.MaxRemovedShare)
	set(&d.DeletionGuard.MinResources, o.DeletionGuard.MinResources)
	set(&d.DeletionGuard.ReleaseAfter, o.DeletionGuard.ReleaseAfter)
	set(&d.NackBreaker.Clients, o.NackBreaker.Clients)
	set(&d.Waves, o.Waves)
	set(&d.AckShare, o.AckShare)
	set(&d.MaxWait, o.MaxWait)
	return d
}

// set replaces *dst with *v when v is set.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// delivery validates the delivery section and every authority's
// override: shares from 0 to 1, counts and durations not negative, each
// wave by share or by node clusters.
func (v *validator) delivery() {
	d := v.c.Delivery
	v.deliveryKeys("delivery", &d.DeletionGuard.MaxRemovedShare, &d.DeletionGuard.MinResources, &d.DeletionGuard.ReleaseAfter,
		&d.NackBreaker.Clients, &d.AckShare, &d.MaxWait)
	v.waves("delivery.waves", d.Waves)
	for i, a := range v.c.Authorities {
		o := a.Delivery
		path := joinIndex("authorities", i) + ".delivery"
		v.deliveryKeys(path, o.DeletionGuard.MaxRemovedShare, o.DeletionGuard.MinResources, o.DeletionGuard.ReleaseAfter,
			o.NackBreaker.Clients, o.AckShare, o.MaxWait)
		if o.Waves != nil {
			v.waves(path+".waves", *o.Waves)
		}
	}
}

// deliveryKeys checks the scalar delivery keys under path; nil: not set.
func (v *validator) deliveryKeys(path string, share *float64, minResources *int, releaseAfter *time.Duration,
	clients *int, ackShare *float64, maxWait *time.Duration) {
	g := path + ".deletion_guard"
	if share != nil && !(*share >= 0 && *share <= 1) {
		v.add(g+".max_removed_share", "must be from 0 to 1 (1 turns the guard off), got %v", *share)
	}
	if minResources != nil && *minResources < 0 {
		v.add(g+".min_resources", "must not be negative, got %d", *minResources)
	}
	if releaseAfter != nil {
		v.nonNegative(g+".release_after", *releaseAfter)
	}
	if clients != nil && *clients < 0 {
		v.add(path+".nack_breaker.clients", "must not be negative (0 turns the breaker off), got %d", *clients)
	}
	if ackShare != nil && !(*ackShare > 0 && *ackShare <= 1) {
		v.add(path+".ack_share", "must be above 0 and at most 1, got %v", *ackShare)
	}
	if maxWait != nil {
		v.positive(path+".max_wait", *maxWait)
	}
}

// waves checks a waves list: each wave by a share (above 0, at most 1)
// or by node clusters (patterns as access rules take them), not both;
// the shares summing to at most 1; min_wait not negative.
func (v *validator) waves(path string, ws []Wave) {
	total := 0.0
	for i, w := range ws {
		p := joinIndex(path, i)
		switch {
		case w.Share != 0 && len(w.NodeClusters) > 0:
			v.add(p, "set share or node_clusters, not both")
		case len(w.NodeClusters) > 0:
			for j, c := range w.NodeClusters {
				if c == "" {
					v.add(joinIndex(p+".node_clusters", j), "must not be empty")
				}
			}
		case !(w.Share > 0 && w.Share <= 1):
			v.add(p+".share", "must be above 0 and at most 1 (or set node_clusters), got %v", w.Share)
		default:
			total += w.Share
		}
		v.nonNegative(p+".min_wait", w.MinWait)
	}
	if total > 1+1e-9 {
		v.add(path, "the shares sum to %s, more than the whole fleet (1)", strconv.FormatFloat(total, 'g', 6, 64))
	}
}
