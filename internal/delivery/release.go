package delivery

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Released is one link's held removals of one type and reason that a
// release applied.
type Released struct {
	Authority string    `json:"authority"`
	Group     string    `json:"group,omitempty"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Resources int       `json:"resources"`
	HeldSince time.Time `json:"held_since"`
	// Names are the first names released, sorted.
	Names []string `json:"names"`
}

// Release applies the held removals of authority ("": every one) and type
// URL ("": every type): clients are sent the removals now. by says who
// asked, for the log. It returns what it released.
func (d *Delivery) Release(authority, typeURL, by string) []Released {
	return d.release(cache.DeferralFilter{Authority: authority, TypeURL: typeURL}, by)
}

// release releases what f selects, logging one line per link, type and
// reason.
func (d *Delivery) release(f cache.DeferralFilter, by string) []Released {
	done := d.held.ReleaseDeferred(f)
	out := make([]Released, 0, len(done))
	for _, r := range done {
		out = append(out, Released{Authority: r.Link.Authority, Group: r.Link.Group, Type: r.TypeURL, Reason: r.Reason,
			Resources: r.Count, HeldSince: r.Since, Names: r.Names})
		d.lg.Warn("held removals released: clients are sent the removals", zap.String("authority", r.Link.Authority),
			zap.String("group", r.Link.Group), zap.String("type_url", r.TypeURL), zap.String("reason", r.Reason),
			zap.Int("resources", r.Count), zap.Duration("held_for", d.now().Sub(r.Since)), zap.String("by", by))
	}
	return out
}

// Run releases held removals once their authority's release_after has
// passed (the origin went on without the resources that long) until ctx
// ends. It sleeps until the next one is due, and wakes when a hold starts
// or the config changes.
func (d *Delivery) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := d.releaseDue()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(d.now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// releaseDue releases the held removals whose release_after has passed,
// and returns when to look again: when the next one is due, now after a
// release (zero: nothing is held with a release_after).
func (d *Delivery) releaseDue() time.Time {
	s := d.settings.Load()
	now := d.now()
	var next time.Time
	for _, h := range d.held.Deferrals() {
		after := s.of(h.Link.Authority).DeletionGuard.ReleaseAfter
		if after <= 0 {
			continue
		}
		due := h.Since.Add(after)
		if !due.After(now) {
			d.release(cache.DeferralFilter{Authority: h.Link.Authority, TypeURL: h.TypeURL, DeferredBy: now.Add(-after)}, "release_after")
			due = now // what is left was held later: look again
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}
