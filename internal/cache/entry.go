package cache

import (
	"time"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

// linkType is one (link, type) pair: the unit of FullState and of the
// Wildcard collection.
type linkType struct {
	link    LinkID
	typeURL string
}

func (k Key) linkType() linkType { return linkType{link: k.Link, typeURL: k.TypeURL} }

func (st linkType) wildcard() Key {
	return Key{Link: st.link, TypeURL: st.typeURL, Name: Wildcard}
}

// entry is what the cache knows of one Key. Every field is guarded by
// Cache.mu.
type entry struct {
	key Key
	// collection is true for Wildcard and glob keys. read-only after creation.
	collection bool
	// glob is the canonical glob key name a resource is a member of while
	// present; "" for legacy names and collections. read-only after creation.
	glob string

	// state of a resource. For a collection: StatePending until the origin
	// answered it, then StatePresent ("known"); its reported state is
	// computed from its members (see collectionStateLocked).
	state State
	// res is the current revision while state == StatePresent.
	res *Resource
	// lapsed is the revision whose TTL elapsed, while the entry is absent
	// for that reason only: a heartbeat of its version brings it back.
	lapsed *Resource
	// err is the origin's error for this key (resource_errors): NOT_FOUND
	// while absent for that reason, or a transient one beside the state it
	// keeps (the cached revision, or pending). Cleared by a revision, a
	// removal or an answer. Never modified once set (shared with clients).
	err *statuspb.Status
	// originVersion is the origin's version of the latest revision it sent
	// (res.OriginVersion, or newer when the origin resent the same bytes
	// under a new version).
	originVersion string
	// expires is when res lapses without an update or heartbeat; zero: no
	// TTL. Written only by Cache.setExpiresLocked.
	expires time.Time
	// heapPos is 1 + the entry's index in Cache.expiries; 0: not in it.
	heapPos int
	// deferral: the origin removed this present resource and the
	// RemovalGuard deferred the removal (deferred.go); nil otherwise.
	deferral *deferral
	// accepted: the key's last accepted revision, kept beside res while
	// res rolls out and differs from it; nil: none kept. rolling: res
	// rolls out (the Gate watches it) until Settle. hold: why res is held
	// back from some clients; nil: it is not. All three rollout.go.
	accepted *Resource
	rolling  bool
	hold     *Hold

	// waiting: watchers owed a fresh copy of a do_not_cache revision (they
	// started watching while it was cached), by the key each watches (e's
	// own or an alias of it). It is withheld from them (KeyLookup.Withheld)
	// until the origin sends the resource again (refetch.go).
	waiting map[Watcher]Key

	// subscribed: the cache asked the Subscriber for this key and has not
	// unsubscribed it. Only subscribed keys are unsubscribed on eviction.
	subscribed bool
	// lastFetch: when the cache last asked the origin for this key (its
	// subscription, or a refetch); fetch: a fetch delayed by the
	// refetch interval, nil: none (refetch.go).
	lastFetch time.Time
	fetch     *delayedFetch
	// inLRU: the key is in Cache.lru (nobody watches it).
	inLRU bool
	// lruBytes is what this entry adds to Cache.lruBytes while inLRU.
	lruBytes int64
	// counted is what this entry adds to the cache's byte total
	// (Stats.Bytes, xds_relay_cache_bytes): size() when it was last
	// resized (Cache.resizeLocked).
	counted int64
}

// visibleState is the state a reader sees at now: a present resource whose
// TTL elapsed reads as StateAbsent, also in the moment between the TTL
// elapsing and the expiry timer making it absent (see expiry.go).
func (e *entry) visibleState(now time.Time) State {
	if e.state == StatePresent && !e.expires.IsZero() && !now.Before(e.expires) {
		return StateAbsent
	}
	return e.state
}

// size is the bytes the entry holds, as cache.max_bytes counts them
// (size.go): its current revision and key, the last accepted revision
// kept beside it (rollout.go), and its resource error.
func (e *entry) size() int64 {
	n := errBytes(e.err)
	if e.state == StatePresent {
		n += int64(e.res.Size()+e.accepted.Size()) + keyBytes(e.key, e.res)
	}
	return n
}

// expiry computes when a revision lapses: its TTL after it arrived (after
// now when Arrived is unset). Zero when it has no TTL.
func expiry(r *Resource, now time.Time) time.Time {
	if r == nil || r.TTL == nil {
		return time.Time{}
	}
	d := r.TTL.AsDuration()
	if d <= 0 {
		return time.Time{}
	}
	if !r.Arrived.IsZero() {
		now = r.Arrived
	}
	return now.Add(d)
}
