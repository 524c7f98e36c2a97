package cache

import (
	"sort"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

// The cache's one read API: Lookup reads a resource key, LookupMembers a
// collection, each under one lock, everything a response is built from:
// the revision, its state, the key's error (resourceerrors.go), where the
// revision stands in its rollout (rollout.go) and, for Lookup, whether the
// watcher reading it may be sent it now (a do_not_cache revision it is
// owed a fresh copy of: refetch.go). Writers build responses from them.
//
// What a key reads as (servingLocked): its own entry when present, else
// the present resource it is an alias of (aliases.go), else its own. A new
// Watch is answered by the same entry (watchServedLocked).

// KeyLookup is what Lookup reads of a resource key.
type KeyLookup struct {
	// Res is the revision the key reads as; nil unless State is
	// StatePresent. A key that is an alias of a present resource reads as
	// that resource, under its own Name, when it is not present itself.
	Res *Resource
	// State: a key the cache holds nothing for reads as StateAbsent when
	// its known glob covers it, StatePending otherwise (a known Wildcard
	// says nothing of a name).
	State State
	// Err is the key's error: the origin's (kept until cleared), or, for a
	// pending key without one, its link's (SetLinkError). A present key
	// may carry a transient error beside its revision; an absent one the
	// origin's NOT_FOUND (nil: absent without an error sent).
	Err *statuspb.Status
	// Rollout is where Res stands in its rollout (rollout.go): what a
	// client is sent of it is Rollout.Serve's, decided from this one read.
	Rollout Rollout
	// owed: the watcher that looked the key up is owed a fresh copy of
	// Res, a do_not_cache revision (refetch.go).
	owed bool
}

// Withheld reports whether r, the revision of l a client would be sent
// (Res, or the one Rollout.Serve picked), must not be sent to the watcher
// that looked the key up: r is do_not_cache and the watcher is owed a fresh
// copy of it from the origin, or r is not what the key reads as. The
// watcher is notified of the key when it may be sent.
func (l KeyLookup) Withheld(r *Resource) bool {
	return r.DoNotCache() && (r != l.Res || l.owed)
}

// Lookup reads resource key k for watcher w (nil: none; then nothing is
// withheld, see KeyLookup.Withheld).
func (c *Cache) Lookup(w Watcher, k Key) KeyLookup {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	e := c.servingLocked(k, now)
	if e == nil {
		if !isCollectionName(k.Name) && c.coveredByKnownLocked(k, globOf(k.Name)) {
			return KeyLookup{State: StateAbsent}
		}
		return KeyLookup{State: StatePending, Err: c.linkErr[k.Link]}
	}
	if e.collection {
		return KeyLookup{State: StatePending}
	}
	switch st := e.visibleState(now); st {
	case StatePresent:
		l := KeyLookup{Res: e.res, State: st, Err: e.err, Rollout: e.rolloutLocked()}
		if w != nil && e.res.DoNotCache() {
			_, l.owed = e.waiting[w]
		}
		return l
	case StatePending:
		if e.err == nil {
			return KeyLookup{State: st, Err: c.linkErr[k.Link]}
		}
		return KeyLookup{State: st, Err: e.err}
	default:
		return KeyLookup{State: st, Err: e.err}
	}
}

// CollectionLookup is what LookupMembers reads of a collection.
type CollectionLookup struct {
	// Members are the present members, sorted by name. They may be
	// non-empty while the collection is pending (resources cached through
	// other subscriptions).
	Members []*Resource
	// State is StatePending until the origin answered the collection, then
	// StatePresent, or StateAbsent when it is known to be empty.
	State State
	// Err is the collection's own error: the origin's for the glob or
	// Wildcard itself, or, while it is pending without one, its link's.
	Err *statuspb.Status
	// MemberErrs are the errors of the members that carry one (a transient
	// error beside the revision), by the member's revision; nil when none
	// does.
	MemberErrs map[*Resource]*statuspb.Status
	// Rollouts: where the members that roll out held back, or whose
	// removal is deferred, stand (rollout.go), by the member's revision;
	// nil when none does.
	Rollouts map[*Resource]Rollout
}

// LookupMembers reads collection key k (glob or Wildcard). Members are
// never withheld: a new collection watcher is served the cached members,
// do_not_cache or not.
func (c *Cache) LookupMembers(k Key) CollectionLookup {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.membersOfLocked(k)
	if e := c.entries[k]; e != nil && e.collection {
		l.Err = e.err
	}
	if l.Err == nil && l.State == StatePending {
		l.Err = c.linkErr[k.Link]
	}
	return l
}

// membersOfLocked is LookupMembers without the collection's error.
func (c *Cache) membersOfLocked(k Key) CollectionLookup {
	now := c.now()
	var l CollectionLookup
	for _, m := range c.membersLocked(k) {
		if m.visibleState(now) != StatePresent {
			continue
		}
		l.Members = append(l.Members, m.res)
		if m.err != nil {
			if l.MemberErrs == nil {
				l.MemberErrs = make(map[*Resource]*statuspb.Status)
			}
			l.MemberErrs[m.res] = m.err
		}
		if m.hold != nil || m.deferral != nil {
			if l.Rollouts == nil {
				l.Rollouts = make(map[*Resource]Rollout)
			}
			l.Rollouts[m.res] = m.rolloutLocked() // rollout.go
		}
	}
	sort.Slice(l.Members, func(i, j int) bool { return l.Members[i].Name < l.Members[j].Name })
	l.State = StatePending
	if e := c.entries[k]; e != nil && e.collection {
		l.State = c.collectionStateLocked(e)
	}
	return l
}

// servingLocked returns the entry whose revision resource key k reads as
// at now: its own when present, else the present resource k is an alias
// of, else its own (nil: none).
func (c *Cache) servingLocked(k Key, now time.Time) *entry {
	e := c.entries[k]
	if e != nil && e.visibleState(now) == StatePresent {
		return e
	}
	if t := c.aliases[k]; t != nil && t.visibleState(now) == StatePresent {
		return t
	}
	return e
}

// watchServedLocked answers a new watch by w of resource key k (entry e)
// when another entry serves it or it is owed fresh: the resource k is an
// alias of (a hit, notified at once), or a do_not_cache revision (a miss:
// asked of the origin again, refetch.go). It reports whether it answered;
// if not, k is answered by its own entry as any key is.
func (c *Cache) watchServedLocked(nb *noteBuilder, w Watcher, k Key, e *entry, node *corev3.Node, now time.Time) bool {
	se := c.servingLocked(k, now)
	if se == nil || se.visibleState(now) != StatePresent {
		return false
	}
	if c.oweFreshLocked(w, k, se, node, now) {
		c.countLocked(k, false)
		return true
	}
	if se == e {
		return false
	}
	c.countLocked(k, true)
	nb.add(w, k)
	return true
}
