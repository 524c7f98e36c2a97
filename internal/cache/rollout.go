package cache

import (
	"hash/fnv"
	"time"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/propagation"
)

// Rollouts (safe delivery's NACK breaker and waves, as the cache keeps
// them). With a Gate set, an Apply asks it, before the lock, whether the
// update's new revisions roll out (Gate.Begin). A new revision that rolls
// out keeps beside it the key's last accepted revision (entry.accepted),
// until its rollout ends (Settle): then the key keeps one revision again.
// So a key keeps at most two revisions, both counted in max_bytes
// (entry.size). While its rollout lasts, the newest revision may be held
// back from some clients (Hold: the breaker tripped on it, or its wave has
// not reached them); a read returns the newest revision with where it
// stands (Rollout), and Rollout.Serve decides, per client, which revision
// that client is sent. The gate changes a hold with SetHold; every change
// of a hold is announced to the key's watchers as one change.
//
// The last accepted revision: when a rolling revision is replaced by a
// newer one, it becomes the key's last accepted revision if it was not
// held (no breaker trip, every wave open) and a client ACKed it (its
// change's record counts an ACK: internal/propagation; a revision whose
// rollout ended is accepted whatever the record says); otherwise the key
// keeps the last accepted revision it had (the next version starts
// afresh). The origin sending the last accepted revision again brings
// the key back to it: the same revision, so a client that has it is sent
// nothing, and no rollout.

// HoldReason is why a key's newest revision is held back from a client.
type HoldReason uint8

const (
	// HoldNone: it is not; the client is sent the newest.
	HoldNone HoldReason = iota
	// HoldBreaker: the NACK breaker tripped on it: held from every client.
	HoldBreaker
	// HoldWave: it rolls out in waves and the client's has not opened.
	HoldWave
)

func (r HoldReason) String() string {
	switch r {
	case HoldBreaker:
		return "breaker"
	case HoldWave:
		return "wave"
	}
	return "none"
}

// Viewer is a client as a hold tells it apart: its node id and cluster,
// and the id's stable hash (ViewerOf).
type Viewer struct {
	NodeID  string
	Cluster string
	Hash    uint64
}

// ViewerOf returns the Viewer of a node: Hash is FNV-1a (64 bits) of its
// id, mixed so that similar ids spread over the whole range (murmur3's
// finalizer), the same on every relay and across reconnects.
func ViewerOf(nodeID, cluster string) Viewer {
	h := fnv.New64a()
	_, _ = h.Write([]byte(nodeID))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return Viewer{NodeID: nodeID, Cluster: cluster, Hash: x}
}

// Nack is a client's NACK of a response that carried new revisions, as a
// session reports it to the NACK breaker (package delivery).
type Nack struct {
	// Node is the client's node id ("" when it sent none); TypeURL the
	// response's type.
	Node    string
	TypeURL string
	// Detail is the client's error_detail.
	Detail *statuspb.Status
	// Revisions: what the NACKed response carried that was new to the
	// client (each a resource's version).
	Revisions []*Resource
	// Relay: the client is a relay below whose own NACK breaker tripped
	// on Revisions (its NACK carries xdstype.BreakerDetail): enough to
	// trip this relay's breaker too.
	Relay bool
}

// Waves says which clients a revision rolling out in waves reaches now.
// Immutable; safe for concurrent use.
type Waves interface {
	// Admits reports whether v is in a wave that is open.
	Admits(v Viewer) bool
}

// Hold is why a key's newest revision is held back from some clients.
// Immutable once set (SetHold replaces it).
type Hold struct {
	Reason HoldReason
	// Waves: who is admitted (HoldWave).
	Waves Waves
	// Since: when the hold started.
	Since time.Time
}

// Admits reports whether the hold lets v have the newest revision.
func (h *Hold) Admits(v Viewer) bool {
	switch {
	case h == nil:
		return true
	case h.Reason == HoldWave:
		return h.Waves == nil || h.Waves.Admits(v)
	}
	return false
}

// Rollout is where a key's newest revision stands, as a read returns it.
type Rollout struct {
	// Hold is why the newest is held back from some clients; nil: it is
	// not.
	Hold *Hold
	// Accepted is the key's last accepted revision, while the newest
	// rolls out and differs from it; nil: none kept.
	Accepted *Resource
	// Deferred: the origin removed the key and the deletion guard keeps
	// it (deferred.go).
	Deferred bool
}

// Serve returns the revision of a key a client v is sent, the key's newest
// revision being newest and the client having has (nil: nothing, or
// only a version it declared), and why it is not newest. Not held from
// v: newest. Held: the last accepted revision; without one, newest for a
// wave (a client is never kept waiting on one: there is nothing older)
// and, for the breaker, what the client has (nil: nothing is sent).
// reason is HoldNone when newest is served.
func (ro Rollout) Serve(newest *Resource, v Viewer, has *Resource) (r *Resource, reason HoldReason) {
	h := ro.Hold
	switch {
	case newest == nil || h.Admits(v):
		return newest, HoldNone
	case ro.Accepted != nil:
		return ro.Accepted, h.Reason
	case h.Reason == HoldWave || (has != nil && has.Version == newest.Version):
		return newest, HoldNone
	}
	return has, h.Reason
}

// Gate is safe delivery's say on an origin change's new revisions
// (package delivery: the NACK breaker and waves). Its methods are called
// without the cache lock and must not call back into the cache.
type Gate interface {
	// Begin is asked before an Apply on link of typeURL that brings
	// revisions: whether its new revisions roll out (keep the last
	// accepted revision beside them until Settle), and the hold they
	// start under (nil: none).
	Begin(link LinkID, typeURL string) (rolling bool, hold *Hold)
	// Began is told, after such an Apply, what rolled out.
	Began(s RolloutStart)
}

// RolloutStart is what one Apply started rolling out.
type RolloutStart struct {
	Link    LinkID
	TypeURL string
	Arrived time.Time
	// Revisions: the new revisions that roll out, by key.
	Revisions []Revision
	// Back: keys the origin brought back to their last accepted revision
	// (their rollout ended).
	Back []Key
	// Change: the ledger's record of the change (nil: the ledger is off).
	Change *propagation.Change
	// Hold: the hold they started under (nil: none).
	Hold *Hold
}

// rolloutLocked is where e's newest revision stands (Rollout).
func (e *entry) rolloutLocked() Rollout {
	return Rollout{Hold: e.hold, Accepted: e.accepted, Deferred: e.deferral != nil}
}

// rollLocked is the revision e takes for r, a new revision of its key,
// and starts its rollout when a's update rolls out (see above): r stamped
// with the change's record, or the key's last accepted revision when r is
// that again.
func (c *Cache) rollLocked(a *applyRun, e *entry, r *Resource) *Resource {
	var old *Resource
	if e.state == StatePresent {
		old = e.res
	}
	if !a.rolling {
		e.accepted, e.rolling, e.hold = nil, false, nil
		return a.stamp(r)
	}
	if e.accepted != nil && identical(e.accepted, r) {
		back := e.accepted
		e.accepted, e.rolling, e.hold = nil, false, nil
		a.rollout.Back = append(a.rollout.Back, e.key)
		return back
	}
	switch {
	case old == nil:
		e.accepted = nil // nothing to go back to
	case !e.rolling || (e.hold == nil && ackedOnce(old)):
		e.accepted = old
	}
	r = a.stamp(r)
	e.rolling, e.hold = true, a.hold
	a.rollout.Revisions = append(a.rollout.Revisions, Revision{Key: e.key, Res: r})
	return r
}

// ackedOnce reports whether a client ACKed r, as its change's record
// counts (false without a record).
func ackedOnce(r *Resource) bool {
	return r.Change != nil && r.Change.Counts().Acked > 0
}

// endRolloutLocked forgets e's rollout: it keeps one revision, or none.
func (e *entry) endRolloutLocked() {
	e.accepted, e.rolling, e.hold = nil, false, nil
}

// beginRollout asks the gate about u before Apply locks (see Gate.Begin).
func (c *Cache) beginRollout(a *applyRun, u Update, arrived time.Time) {
	if c.gate == nil || len(u.Resources) == 0 {
		return
	}
	a.rolling, a.hold = c.gate.Begin(u.Link, u.TypeURL)
	a.rollout = RolloutStart{Link: u.Link, TypeURL: u.TypeURL, Arrived: arrived, Change: a.rec, Hold: a.hold}
}

// tellGate tells the gate what a's Apply rolled out: after the lock,
// before its watchers are told.
func (c *Cache) tellGate(a *applyRun) {
	if c.gate == nil || (len(a.rollout.Revisions) == 0 && len(a.rollout.Back) == 0) {
		return
	}
	c.gate.Began(a.rollout)
}

// currentLocked returns the entry of rv's key while rv's version is its
// newest and it rolls out; nil otherwise.
func (c *Cache) currentLocked(rv Revision) *entry {
	e := c.entries[rv.Key]
	if e == nil || e.state != StatePresent || !e.rolling || rv.Res == nil || e.res.Version != rv.Res.Version {
		return nil
	}
	return e
}

// SetHold sets the hold of each of revs still its key's newest revision
// and rolling out (h nil: held from nobody), and tells their watchers as
// one change. It returns how many it set.
func (c *Cache) SetHold(revs []Revision, h *Hold) int {
	return c.changeRollouts(revs, func(e *entry) bool {
		if e.hold == h {
			return false
		}
		e.hold = h
		return true
	})
}

// Settle ends the rollout of each of revs still its key's newest
// revision: the last accepted revision kept beside it is dropped, and any
// hold (then its watchers are told, as one change). It returns how many
// were still current.
func (c *Cache) Settle(revs []Revision) int {
	return c.changeRollouts(revs, func(e *entry) bool {
		held := e.hold != nil
		e.endRolloutLocked()
		c.resizeLocked(e)
		return held
	})
}

// changeRollouts applies f to the entry of each of revs still current
// (currentLocked) and announces, as one change, those f reports a change
// for clients of. It returns how many were current. What a snapshot keeps
// does not change (Generation stays): only the revision kept beside the
// newest, or who is served it.
func (c *Cache) changeRollouts(revs []Revision, f func(e *entry) bool) int {
	a := newApplyRun()
	c.mu.Lock()
	n := 0
	for _, rv := range revs {
		e := c.currentLocked(rv)
		if e == nil {
			continue
		}
		n++
		if f(e) {
			a.change(e.key, true)
			c.noteAliasesLocked(&a, e)
		}
	}
	nb := c.notesLocked(&a, c.now())
	c.mu.Unlock()
	nb.send()
	return n
}

// Rolling reports whether rv is still its key's newest revision and rolls
// out, and its hold.
func (c *Cache) Rolling(rv Revision) (bool, *Hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.currentLocked(rv)
	if e == nil {
		return false, nil
	}
	return true, e.hold
}
