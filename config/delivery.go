package config

import "time"

// DefaultDelivery is the delivery section's defaults: validation on, the
// deletion guard at half of a type's resources, released only by hand.
func DefaultDelivery() Delivery {
	return Delivery{
		Validate: true,
		DeletionGuard: DeletionGuard{
			MaxRemovedShare: DefaultMaxRemovedShare,
			MinResources:    DefaultMinResources,
		},
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
	if o.Validate != nil {
		d.Validate = *o.Validate
	}
	if o.DeletionGuard.MaxRemovedShare != nil {
		d.DeletionGuard.MaxRemovedShare = *o.DeletionGuard.MaxRemovedShare
	}
	if o.DeletionGuard.MinResources != nil {
		d.DeletionGuard.MinResources = *o.DeletionGuard.MinResources
	}
	if o.DeletionGuard.ReleaseAfter != nil {
		d.DeletionGuard.ReleaseAfter = *o.DeletionGuard.ReleaseAfter
	}
	return d
}

// delivery validates the delivery section and every authority's
// override: a share from 0 to 1, a count and a duration not negative.
func (v *validator) delivery() {
	g := v.c.Delivery.DeletionGuard
	v.deletionGuard("delivery.deletion_guard", &g.MaxRemovedShare, &g.MinResources, &g.ReleaseAfter)
	for i, a := range v.c.Authorities {
		o := a.Delivery.DeletionGuard
		v.deletionGuard(joinIndex("authorities", i)+".delivery.deletion_guard", o.MaxRemovedShare, o.MinResources, o.ReleaseAfter)
	}
}

// deletionGuard checks the deletion guard keys under path; nil: not set.
func (v *validator) deletionGuard(path string, share *float64, minResources *int, releaseAfter *time.Duration) {
	if share != nil && !(*share >= 0 && *share <= 1) {
		v.add(path+".max_removed_share", "must be from 0 to 1 (1 turns the guard off), got %v", *share)
	}
	if minResources != nil && *minResources < 0 {
		v.add(path+".min_resources", "must not be negative, got %d", *minResources)
	}
	if releaseAfter != nil {
		v.nonNegative(path+".release_after", *releaseAfter)
	}
}
