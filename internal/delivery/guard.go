package delivery

import (
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// The reasons of a hold (the reason label of xds_relay_delivery_held).
const (
	// ReasonShare: the change removes more than max_removed_share of a
	// link's resources of one type.
	ReasonShare = "deletion_share"
	// ReasonEmpty: the change empties a collection or wildcard clients
	// subscribe to.
	ReasonEmpty = "deletion_empty"
	// ReasonBreaker: clients NACKed the version (breaker.go).
	ReasonBreaker = "breaker"
	// ReasonWave: the version rolls out wave by wave and has not reached
	// every client (waves.go).
	ReasonWave = "wave"
	// ReasonWaveStalled: its rollout stopped, a wave's clients not having
	// ACKed within max_wait (or the breaker tripped on another of its
	// versions): only a release moves it on.
	ReasonWaveStalled = "wave_stalled"
)

// Reasons lists every reason a hold has (their series exist from start).
func Reasons() []string {
	return []string{ReasonBreaker, ReasonEmpty, ReasonShare, ReasonWave, ReasonWaveStalled}
}

// DeferRemovals is cache.RemovalGuard: the deletion guard of r's
// authority decides (guard).
func (d *Delivery) DeferRemovals(r cache.Removals) string {
	return guard(d.settings.Load().of(r.Link.Authority).DeletionGuard, r)
}

// guard is the deletion guard's decision on r, what one origin change
// would remove of one link's type (held resources not counted): held when
// it empties a watched collection or wildcard that had a member, whatever
// its size, or removes more than the share of at least min_resources;
// never with a share of 1.
func guard(g config.DeletionGuard, r cache.Removals) string {
	switch {
	case g.MaxRemovedShare >= 1 || r.Removed == 0:
		return ""
	case len(r.Emptied) > 0:
		return ReasonEmpty
	case r.Present >= g.MinResources && float64(r.Removed) > g.MaxRemovedShare*float64(r.Present):
		return ReasonShare
	}
	return ""
}

// Deferred is cache.RemovalGuard's report of an Apply: one log line per
// hold (the removals of one origin change held) and per end of one (the
// origin sent resources again).
func (d *Delivery) Deferred(events []cache.DeferralEvent) {
	for _, ev := range events {
		fields := []zap.Field{zap.String("authority", ev.Link.Authority), zap.String("group", ev.Link.Group),
			zap.String("type_url", ev.TypeURL), zap.String("reason", ev.Reason), zap.Int("resources", ev.Count)}
		switch ev.Kind {
		case cache.DeferralStarted:
			r := ev.Removals
			d.lg.Warn("origin removals held: clients keep the resources until released ("+d.releasePath+") or the origin sends them again",
				append(fields, zap.Int("present", r.Present), zap.Int("removed", r.Removed), zap.Strings("emptied", r.Emptied),
					zap.Duration("release_after", d.settings.Load().of(ev.Link.Authority).DeletionGuard.ReleaseAfter))...)
		case cache.DeferralReturned:
			d.lg.Info("held removals ended: the origin sent the resources again", fields...)
		}
	}
	d.poke()
}
