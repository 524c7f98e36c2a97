package cache

import (
	"bytes"
	"slices"
	"strings"
	"time"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// applyRun is the bookkeeping of one Apply: what changed, to notify once
// the lock is unlocked.
type applyRun struct {
	// cs is the origin change being applied (nil for an expiry sweep).
	cs *ChangeSet
	// revised: the new revisions of resources, in order (a subset of order).
	revised []Revision
	// changed keys in order, with whether the key is or was a collection
	// member (then collection watchers are notified too).
	order  []Key
	member map[Key]bool
	// before holds the state of each touched collection before the update.
	before map[Key]State
	// owed: watchers owed a fresh do_not_cache revision that the origin
	// sent again unchanged: told although nothing changed for the others.
	owed []note
	// deferReason: the RemovalGuard deferred this change's removals ("":
	// it did not), having been asked about removals; unguarded: the update
	// is the relay's own (Update.Unguarded). deferrals: the deferrals it
	// started and ended, told to the RemovalGuard after the lock
	// (deferred.go).
	deferReason string
	removals    Removals
	unguarded   bool
	deferrals   []DeferralEvent
	// rec: the propagation ledger's record of the change (propagation.go);
	// nil when the ledger is off or for an expiry sweep.
	rec *propagation.Change
	// rolling, hold: the Gate's answer for the update (rollout.go);
	// rollout: what it rolled out (its new revisions, the keys back at
	// their last accepted revision), told to the Gate after the lock.
	rolling bool
	hold    *Hold
	rollout RolloutStart
}

func newApplyRun() applyRun {
	return applyRun{member: make(map[Key]bool), before: make(map[Key]State)}
}

func (a *applyRun) change(k Key, member bool) {
	if m, ok := a.member[k]; ok {
		a.member[k] = m || member
		return
	}
	a.order = append(a.order, k)
	a.member[k] = member
}

// touchLocked records collection k's state before the update.
func (c *Cache) touchLocked(a *applyRun, k Key) {
	if _, ok := a.before[k]; ok {
		return
	}
	if e := c.entries[k]; e != nil && e.collection {
		a.before[k] = c.collectionStateLocked(e)
	}
}

// touchMemberLocked records the states of the collections e belongs to.
func (c *Cache) touchMemberLocked(a *applyRun, e *entry) {
	c.touchLocked(a, e.key.linkType().wildcard())
	if e.glob != "" {
		c.touchLocked(a, c.globKey(e.key, e.glob))
	}
}

// Apply stores what the origin sent and announces it to watchers as one
// change (after unlocking). Each resource's Version is set here,
// from its bytes. A revision with the cached bytes and TTL is not a change,
// whatever the origin's version: it only refreshes the TTL and notifies
// nobody. A heartbeat refreshes the TTL of the cached revision and
// notifies; a late one, for a resource whose TTL already elapsed, brings
// that revision back if it names its origin version (otherwise it is
// ignored: only a new revision brings the resource back).
//
// With a Validator or a RemovalGuard, the update is screened first
// (screen.go): a refused revision is left out, and returned in Applied;
// removals the guard defers leave their resources present (deferred.go).
func (c *Cache) Apply(u Update) Applied {
	a := newApplyRun()
	arrived := u.Arrived
	if arrived.IsZero() {
		arrived = c.now()
	}
	a.cs = newChangeSet(u.TypeURL, arrived, c.m.fanout.WithLabelValues(xdstype.Label(u.TypeURL)))
	a.rec = c.beginRecord(&u, arrived)
	st := linkType{link: u.Link, typeURL: u.TypeURL}
	var inUpdate map[string]struct{}
	if u.FullState {
		inUpdate = make(map[string]struct{}, len(u.Resources))
	}
	u, sc := c.prepare(&a, u, arrived)

	c.mu.Lock()
	now := c.now()
	c.expireDueLocked(&a, now)
	// After the expiry: what lapses is never deferred.
	a.deferReason, a.removals, a.unguarded = sc.reason, sc.removals, u.Unguarded
	for _, r := range u.Resources {
		c.applyResourceLocked(&a, u, r, inUpdate, now)
	}
	for _, name := range u.Removed {
		c.applyRemovedLocked(&a, Key{Link: u.Link, TypeURL: u.TypeURL, Name: name})
	}
	for _, name := range u.Complete {
		c.applyCompleteLocked(&a, Key{Link: u.Link, TypeURL: u.TypeURL, Name: name})
	}
	// After Complete: an error the response carries for a collection it
	// also answers stays beside the answer.
	for _, re := range u.Errors {
		c.applyErrorLocked(&a, u.Link, u.TypeURL, re, inUpdate)
	}
	if u.FullState {
		for _, n := range u.Unanswered {
			inUpdate[n] = struct{}{} // not spoken for: left as it is
		}
		c.applyFullStateLocked(&a, st, inUpdate)
	}
	c.finishUnlock(&a, now)
	return Applied{Refused: sc.refused}
}

// screened is what prepare found of an update: the revisions refused, and
// the removal guard's reason with what it was asked (screen.go).
type screened struct {
	refused  []Refusal
	reason   string
	removals Removals
}

// prepare readies u for Apply without the lock: only what its link owns
// (authority.go), its revisions versioned, screened (screen.go), and the
// Gate asked whether they roll out (rollout.go).
func (c *Cache) prepare(a *applyRun, u Update, arrived time.Time) (Update, screened) {
	u = c.ownedOnly(u)
	u.Resources = versioned(u.Resources)
	var sc screened
	if c.validator != nil || c.guard != nil {
		u, sc.refused, sc.reason, sc.removals = c.screen(u)
	}
	c.beginRollout(a, u, arrived)
	return u, sc
}

// applyCompleteLocked: the update answers k in full (Update.Complete): a
// collection is known, a pending resource absent.
func (c *Cache) applyCompleteLocked(a *applyRun, k Key) {
	e := c.entries[k]
	switch {
	case e == nil:
	case e.collection:
		c.touchLocked(a, k)
		e.state = StatePresent
	case e.state == StatePending:
		e.state, e.err = StateAbsent, nil
		c.resizeLocked(e)
		a.change(k, false)
		c.reconcileLocked(e)
	}
}

// finishUnlock ends a change made under mu (an Apply, an expiry): decides
// whom to notify, enforces the bounds and re-arms the expiry timer, then
// unlocks mu and makes the Subscriber calls and notifications.
func (c *Cache) finishUnlock(a *applyRun, now time.Time) {
	// Shared only when no revision starts held back (rollout.go).
	shared := a.cs != nil && len(a.revised) > 0 && len(a.revised) == len(a.order) && a.hold == nil
	recorded := a.describeRecordLocked() // propagation.go
	nb := c.notesLocked(a, now)
	c.gen++
	c.enforceBoundsLocked()
	c.armLocked(now)
	c.mu.Unlock()
	if len(a.deferrals) > 0 {
		c.guard.Deferred(a.deferrals)
	}
	if recorded {
		c.ledger.Add(a.rec) // listed before anyone is told of the change
	}
	c.tellGate(a) // before anyone is told: a client may answer at once (rollout.go)
	if shared {
		// Nothing but new revisions: watchers may share one encoding.
		// Sorted without the lock: nobody sees the set before send.
		slices.SortFunc(a.revised, func(x, y Revision) int { return strings.Compare(x.Key.Name, y.Key.Name) })
		a.cs.revisions = a.revised
	}
	c.flush()
	nb.send()
}

func (c *Cache) applyResourceLocked(a *applyRun, u Update, r *Resource, inUpdate map[string]struct{}, now time.Time) {
	if r == nil {
		return
	}
	name, err := CanonicalName(r.Name)
	if err != nil || isCollectionName(name) {
		c.lg.Warn("update with a resource name that cannot be cached; skipped",
			zap.String("type_url", u.TypeURL), zap.String("name", r.Name), zap.Error(err))
		return
	}
	if inUpdate != nil {
		inUpdate[name] = struct{}{}
	}
	k := Key{Link: u.Link, TypeURL: u.TypeURL, Name: name}
	e := c.entries[k]
	if e != nil {
		c.endDeferralLocked(a, e) // the origin sends it again
	}
	if r.Heartbeat {
		c.applyHeartbeatLocked(a, k, e, r, now)
		return
	}
	if r.Body == nil {
		c.lg.Warn("update with a resource without body; skipped", zap.String("type_url", u.TypeURL), zap.String("name", r.Name))
		return
	}
	if e == nil {
		e = &entry{key: k, state: StatePending, glob: globOf(name)}
		c.entries[k] = e
		c.addByTypeLocked(e)
	}
	c.answerOwedLocked(a, e, r)
	e.originVersion = r.OriginVersion
	if e.state == StatePresent && identical(e.res, r) {
		c.setExpiresLocked(e, expiry(r, now))
		if e.err != nil {
			// The revision again, after an error: clients that were told
			// the error are sent the resource, which clears it (TP3).
			e.err = nil
			c.resizeLocked(e)
			a.change(k, true)
		}
		return
	}
	c.noteAliasesLocked(a, e) // the aliases it leaves
	c.touchMemberLocked(a, e)
	r = c.rollLocked(a, e, r) // stamped with its change's ledger record; its rollout (rollout.go)
	c.setPresentLocked(e, r, now)
	a.change(k, true)
	c.noteAliasesLocked(a, e) // the aliases it takes
	a.revised = append(a.revised, Revision{Key: k, Res: r})
	c.reconcileLocked(e)
}

// applyHeartbeatLocked applies heartbeat r (no body: the origin says the
// revision it last sent still stands, with a new TTL) for key k, cached as
// e (nil: not cached): a present resource's TTL is renewed, one whose TTL
// lapsed on that very revision is present again; any other is ignored.
func (c *Cache) applyHeartbeatLocked(a *applyRun, k Key, e *entry, r *Resource, now time.Time) {
	if e != nil && e.state == StateAbsent && e.lapsed != nil && r.OriginVersion == e.originVersion {
		// A late heartbeat: the origin says the revision whose TTL
		// lapsed still stands. It is present again, with the new TTL.
		back := *e.lapsed
		back.TTL, back.Arrived = r.TTL, r.Arrived
		c.touchMemberLocked(a, e)
		c.setPresentLocked(e, &back, now)
		a.change(k, true)
		c.noteAliasesLocked(a, e)
		c.reconcileLocked(e)
		return
	}
	if e == nil || e.state != StatePresent {
		c.lg.Debug("heartbeat for a resource not cached; ignored", zap.String("type_url", k.TypeURL), zap.String("name", r.Name))
		return
	}
	hb := *e.res
	hb.TTL, hb.Arrived, hb.Heartbeat = r.TTL, r.Arrived, false
	e.res = &hb
	c.resizeLocked(e)
	c.setExpiresLocked(e, expiry(r, now))
	a.change(k, true)
	c.noteAliasesLocked(a, e)
}

func (c *Cache) applyRemovedLocked(a *applyRun, k Key) {
	e := c.entries[k]
	if e == nil {
		return
	}
	if e.collection {
		// The origin says the collection is empty.
		c.touchLocked(a, k)
		e.state, e.err = StatePresent, nil
		c.resizeLocked(e)
		var gone []*entry
		for _, m := range c.membersLocked(k) {
			if m.state == StatePresent {
				gone = append(gone, m)
			}
		}
		for _, m := range gone {
			c.removeResourceLocked(a, m)
		}
		return
	}
	if e.state == StateAbsent {
		return
	}
	c.removeResourceLocked(a, e)
}

// removeResourceLocked makes a present or pending resource absent, unless
// its removal is deferred (deferred.go).
func (c *Cache) removeResourceLocked(a *applyRun, e *entry) {
	if c.deferRemovalLocked(a, e) {
		return
	}
	wasPresent := e.state == StatePresent
	if wasPresent {
		c.touchMemberLocked(a, e)
		c.noteAliasesLocked(a, e)
	}
	c.setAbsentLocked(e)
	a.change(e.key, wasPresent)
	if !e.subscribed && c.watchers[e.key].size() == 0 {
		// Only a collection brought it; nobody asked for it by name. Lookup
		// still reads it as absent while its known glob covers it.
		c.dropLocked(e)
		return
	}
	c.reconcileLocked(e)
}

// applyFullStateLocked: the update held every resource of the link and
// type, so anything else is absent and every collection is known; keep
// lists what it does not touch (its resources, and what it leaves
// unanswered).
func (c *Cache) applyFullStateLocked(a *applyRun, st linkType, keep map[string]struct{}) {
	var gone []*entry
	for name, e := range c.byType[st] {
		if _, ok := keep[name]; ok || e.state == StateAbsent {
			continue
		}
		gone = append(gone, e)
	}
	for _, e := range gone {
		c.removeResourceLocked(a, e)
	}
	for name, e := range c.colls[st] {
		if _, ok := keep[name]; ok {
			continue
		}
		c.touchLocked(a, e.key)
		e.state, e.err = StatePresent, nil
		c.resizeLocked(e)
	}
}

// setPresentLocked stores revision r in e and maintains the member sets,
// gauges and LRU byte count.
func (c *Cache) setPresentLocked(e *entry, r *Resource, now time.Time) {
	c.indexAliasesLocked(e, e.res, r) // e.res is nil unless present
	if e.state != StatePresent {
		e.state = StatePresent
		st := e.key.linkType()
		c.present[st]++
		c.totals.Resources++
		c.m.resources.Inc()
		if e.glob != "" {
			gk := c.globKey(e.key, e.glob)
			m := c.globMembers[gk]
			if m == nil {
				m = make(map[string]*entry)
				c.globMembers[gk] = m
			}
			m[e.key.Name] = e
		}
	}
	e.res, e.lapsed, e.err = r, nil, nil
	c.setExpiresLocked(e, expiry(r, now))
	c.resizeLocked(e)
}

// setAbsentLocked forgets e's revision (if any) and marks it absent.
func (c *Cache) setAbsentLocked(e *entry) {
	e.waiting = nil // its watchers are told of the change
	if e.state == StatePresent {
		c.indexAliasesLocked(e, e.res, nil)
		c.totals.Resources--
		c.m.resources.Dec()
		st := e.key.linkType()
		if c.present[st]--; c.present[st] <= 0 {
			delete(c.present, st)
		}
		if e.glob != "" {
			gk := c.globKey(e.key, e.glob)
			if m := c.globMembers[gk]; m != nil {
				delete(m, e.key.Name)
				if len(m) == 0 {
					delete(c.globMembers, gk)
				}
			}
		}
	}
	e.state, e.res, e.lapsed, e.err = StateAbsent, nil, nil, nil
	e.endRolloutLocked()
	c.setExpiresLocked(e, time.Time{})
	c.resizeLocked(e)
}

// ContentVersion is the relay's version of a resource body: go-control-plane's
// resource hash of its bytes, the very version go-control-plane gives the
// resource in delta.
func ContentVersion(body *anypb.Any) string {
	return cachev3.HashResource(body.GetValue())
}

// versioned returns rs with each revision's Version set from its bytes
// and fields (RevisionVersion), and what its fields hold measured (sized).
// Revisions are immutable once handed over, so one whose Version differs
// is replaced by a copy. Hashing happens before Apply locks: the work is
// per origin change, not per client, and need not block readers.
func versioned(rs []*Resource) []*Resource {
	var out []*Resource
	for i, r := range rs {
		if r == nil || r.Heartbeat || r.Body == nil {
			continue
		}
		v := RevisionVersion(r)
		memo := sized(r) // its fields' bytes (size.go)
		if r.Version == v && memo == r {
			continue
		}
		if out == nil {
			out = slices.Clone(rs)
		}
		if memo == r { // sized made no copy: make one
			cp := *r
			memo = &cp
		}
		memo.Version = v
		out[i] = memo
	}
	if out == nil {
		return rs
	}
	return out
}

// identical: r is the cached revision again (same bytes, fields and TTL),
// whatever version the origin gave it. Versions cover the fields.
func identical(cur, r *Resource) bool {
	return cur != nil && cur.Version == r.Version &&
		cur.Body.GetTypeUrl() == r.Body.GetTypeUrl() &&
		bytes.Equal(cur.Body.GetValue(), r.Body.GetValue()) &&
		sameTTL(cur.TTL, r.TTL)
}

func sameTTL(a, b *durationpb.Duration) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.AsDuration() == b.AsDuration()
}
