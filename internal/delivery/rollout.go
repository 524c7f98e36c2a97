package delivery

import (
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/propagation"
)

// Rollouts: cache.Gate. With the NACK breaker or waves on for an
// authority, each origin change of it that brings new versions is a
// rollout: its versions keep the last accepted version beside them in
// the cache, the breaker counts the clients that NACK them, and waves
// hold them from the clients whose wave has not opened. A rollout ends
// (the cache drops the last accepted version: Settle) once its last wave
// is open and the version was accepted: ack_share of the client streams
// it was sent to ACKed it (the propagation ledger's record of the
// change), or max_wait passed since its last wave opened. A version the
// breaker tripped on stays held until it is released by hand or the
// origin sends another version of the resource (the next version starts
// afresh).

// versionID names a version of a resource: its type, canonical name and
// content version (cache.Resource.Version).
type versionID struct {
	typeURL, name, version string
}

// version is one version of a resource that rolls out. Its fields are
// guarded by Delivery.mu.
type version struct {
	id      versionID
	key     cache.Key
	res     *cache.Resource // a stub: name and versions (stub)
	rollout *rollout
	// nackers: the distinct clients that NACKed a response carrying it,
	// first NACK first (at most nack_breaker.clients kept).
	nackers []nacker
	// trip: the breaker holds it (breaker.go); released: it was released
	// by hand, and is no longer counted.
	trip     *trip
	released bool
}

// rev is v as the cache knows it.
func (v *version) rev() cache.Revision { return cache.Revision{Key: v.key, Res: v.res} }

// rollout is one origin change's versions rolling out. Its fields are
// guarded by Delivery.mu.
type rollout struct {
	link    cache.LinkID
	typeURL string
	arrived time.Time
	change  *propagation.Change // nil: the ledger is off
	// live: its versions still their keys' newest and not settled.
	live map[*version]struct{}
	// waves: its waves (waves.go); nil: none. open: how many are open
	// (past the last: everyone); openedAt: when the last one opened;
	// stalled: a wave's clients did not ACK within max_wait.
	waves    *wavePlan
	open     int
	openedAt time.Time
	stalled  bool
}

// Begin is cache.Gate: an origin change of link's authority rolls out
// when its breaker or waves are on; with waves it starts held from every
// client outside the first wave.
func (d *Delivery) Begin(link cache.LinkID, _ string) (bool, *cache.Hold) {
	s := d.settings.Load().of(link.Authority)
	if len(s.Waves) == 0 {
		return s.NackBreaker.Clients > 0, nil
	}
	var viewers []cache.Viewer
	if d.fleet != nil {
		viewers = d.fleet.Viewers()
	}
	plan := newWavePlan(s, viewers)
	return true, &cache.Hold{Reason: cache.HoldWave, Waves: plan.opened(1), Since: d.now()}
}

// Began is cache.Gate: s's versions roll out. A version the origin
// replaced (by a new one, or by the last accepted one again) no longer
// rolls out; a trip on it ends.
func (d *Delivery) Began(s cache.RolloutStart) {
	now := d.now()
	ro := &rollout{link: s.Link, typeURL: s.TypeURL, arrived: s.Arrived, change: s.Change,
		live: make(map[*version]struct{}, len(s.Revisions)), openedAt: now}
	if s.Hold != nil {
		if w, ok := s.Hold.Waves.(*openWaves); ok {
			ro.waves, ro.open = w.plan, w.open
		}
	}
	var ended []*version
	d.mu.Lock()
	for _, k := range s.Back {
		if v := d.endLocked(k); v != nil {
			ended = append(ended, v)
		}
	}
	for _, rv := range s.Revisions {
		if v := d.endLocked(rv.Key); v != nil {
			ended = append(ended, v)
		}
		v := &version{id: idOf(s.TypeURL, rv), key: rv.Key, res: stub(rv.Res), rollout: ro}
		d.versions[v.id] = v
		d.byKey[rv.Key] = v
		ro.live[v] = struct{}{}
	}
	if len(ro.live) > 0 {
		d.rollouts[ro] = struct{}{}
	}
	d.mu.Unlock()
	d.logEnded(ended, "the origin sent another version")
	d.poke()
}

// stub is what a version's record keeps of revision r: its name and
// versions, not its body or fields, so that a record never keeps alive a
// revision the cache dropped (its bytes are bounded by cache.max_bytes,
// not by rollouts).
func stub(r *cache.Resource) *cache.Resource {
	return &cache.Resource{Name: r.Name, Version: r.Version, OriginVersion: r.OriginVersion}
}

// idOf is rv's versionID.
func idOf(typeURL string, rv cache.Revision) versionID {
	return versionID{typeURL: typeURL, name: rv.Key.Name, version: rv.Res.Version}
}

// endLocked forgets the version of k that rolls out, if any; it returns
// it when the breaker held it (its trip ended).
func (d *Delivery) endLocked(k cache.Key) *version {
	v := d.byKey[k]
	if v == nil {
		return nil
	}
	d.forgetLocked(v)
	if v.trip == nil || v.released {
		return nil
	}
	return v
}

// forgetLocked forgets v: it no longer rolls out.
func (d *Delivery) forgetLocked(v *version) {
	if d.byKey[v.key] == v {
		delete(d.byKey, v.key)
	}
	if d.versions[v.id] == v {
		delete(d.versions, v.id)
	}
	delete(d.trips, v)
	delete(v.rollout.live, v)
	if len(v.rollout.live) == 0 {
		delete(d.rollouts, v.rollout)
	}
}

// logEnded logs one line per trip that ended, and why.
func (d *Delivery) logEnded(vs []*version, why string) {
	for _, v := range vs {
		d.lg.Info("version no longer held by the NACK breaker: "+why, v.fields()...)
	}
}

// fields are v's log fields.
func (v *version) fields() []zap.Field {
	return []zap.Field{zap.String("authority", v.key.Link.Authority), zap.String("group", v.key.Link.Group),
		zap.String("type_url", v.key.TypeURL), zap.String("name", truncate(v.key.Name, maxShownName)),
		zap.String("version", v.res.Version), zap.String("origin_version", truncate(v.res.OriginVersion, maxShownName))}
}

// settleDue ends the rollouts that are over (see above) and moves waves
// on (waves.go); it returns when to look again (zero: nothing rolls out).
func (d *Delivery) settleDue() time.Time {
	now := d.now()
	d.mu.Lock()
	ros := make([]*rollout, 0, len(d.rollouts))
	for ro := range d.rollouts {
		ros = append(ros, ro)
	}
	d.mu.Unlock()
	var next time.Time
	for _, ro := range ros {
		at := d.step(ro, now)
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if t := d.checkTrips(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
		next = t
	}
	return next
}

// settlePoll is how often a rollout that waits for its clients' ACKs is
// looked at (the ledger's counts say nothing when they change).
const settlePoll = 100 * time.Millisecond

// step moves ro on: its waves (waves.go), then, once every wave is open,
// its end (accepted, or max_wait passed). It returns when to look again
// (zero: it ended).
func (d *Delivery) step(ro *rollout, now time.Time) time.Time {
	s := d.settings.Load().of(ro.link.Authority)
	if at, waiting := d.stepWaves(ro, s, now); waiting {
		return at
	}
	d.mu.Lock()
	openedAt := ro.openedAt
	d.mu.Unlock()
	if !accepted(ro.change, s.AckShare) && now.Before(openedAt.Add(s.MaxWait)) {
		return min2(now.Add(settlePoll), openedAt.Add(s.MaxWait))
	}
	d.settle(ro)
	return time.Time{}
}

// accepted reports whether ack_share of the client streams a change was
// sent to ACKed it, none left to answer (false without a record).
func accepted(c *propagation.Change, ackShare float64) bool {
	if !c.FannedOut() {
		return false
	}
	n := c.Counts()
	return n.Sent > 0 && n.Pending == 0 && float64(n.Acked) >= ackShare*float64(n.Sent)
}

// settle ends ro's rollout: the cache drops the last accepted versions of
// its live versions the breaker does not hold; those it holds stay.
func (d *Delivery) settle(ro *rollout) {
	d.mu.Lock()
	var revs []cache.Revision
	for v := range ro.live {
		if v.trip == nil || v.released {
			revs = append(revs, v.rev())
			d.forgetLocked(v)
		}
	}
	delete(d.rollouts, ro) // what the breaker holds stays, by itself (trips)
	d.mu.Unlock()
	if len(revs) > 0 {
		d.held.Settle(revs)
	}
}

func min2(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
