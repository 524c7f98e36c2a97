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

// Release releases what is held of authority ("": every one) and type URL
// ("": every type): held removals are applied (clients are sent them
// now), versions the NACK breaker holds are sent to every client, and
// rollouts stopped or going wave by wave open every wave. by says who
// asked, for the log. It returns what it released.
func (d *Delivery) Release(authority, typeURL, by string) []Released {
	out := d.release(cache.DeferralFilter{Authority: authority, TypeURL: typeURL}, by)
	for _, v := range d.releaseTrips(authority, typeURL) {
		out = append(out, Released{Authority: v.key.Link.Authority, Group: v.key.Link.Group, Type: v.key.TypeURL, Reason: ReasonBreaker,
			Resources: 1, HeldSince: v.trip.since, Names: []string{truncate(v.key.Name, maxShownName)}})
		d.lg.Warn("version held by the NACK breaker released: every client is sent it", append(v.fields(),
			zap.Duration("held_for", d.now().Sub(v.trip.since)), zap.String("by", by))...)
	}
	out = append(out, d.releaseWaves(authority, typeURL, by)...)
	d.poke()
	return out
}

// releaseWaves opens every wave of the rollouts of authority and type URL
// ("": any) that have waves still closed, stalled or not.
func (d *Delivery) releaseWaves(authority, typeURL, by string) []Released {
	type opened struct {
		ro   *rollout
		revs []cache.Revision
	}
	var todo []opened
	d.mu.Lock()
	for ro := range d.rollouts {
		if ro.waves == nil || ro.open > len(ro.waves.waves) || (authority != "" && ro.link.Authority != authority) ||
			(typeURL != "" && ro.typeURL != typeURL) {
			continue
		}
		ro.open, ro.stalled, ro.openedAt = len(ro.waves.waves)+1, false, d.now()
		todo = append(todo, opened{ro: ro, revs: liveRevs(ro)})
	}
	d.mu.Unlock()
	out := make([]Released, 0, len(todo))
	for _, o := range todo {
		d.held.SetHold(o.revs, nil)
		out = append(out, Released{Authority: o.ro.link.Authority, Group: o.ro.link.Group, Type: o.ro.typeURL, Reason: ReasonWave,
			Resources: len(o.revs), HeldSince: o.ro.arrived, Names: revNames(o.revs)})
		d.lg.Warn("rollout released: every wave opened", zap.String("authority", o.ro.link.Authority), zap.String("type_url", o.ro.typeURL),
			zap.Int("versions", len(o.revs)), zap.String("by", by))
	}
	return out
}

// revNames is the first 10 names of revs (sorted), each cut for the page.
func revNames(revs []cache.Revision) []string {
	out := make([]string, 0, min(len(revs), 10))
	for _, rv := range revs[:min(len(revs), 10)] {
		out = append(out, truncate(rv.Key.Name, maxShownName))
	}
	return out
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
// passed (the origin went on without the resources that long), moves
// rollouts on (their waves, their end: rollout.go) and ends the trips of
// versions gone, until ctx ends. It sleeps until the next is due, and
// wakes when a hold or a rollout starts or the config changes.
func (d *Delivery) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := d.releaseDue()
		if at := d.settleDue(); !at.IsZero() && (next.IsZero() || at.Before(next)) { // rollout.go
			next = at
		}
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
