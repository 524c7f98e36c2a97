package cache

import (
	"math"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Options configure a Cache.
type Options struct {
	// MaxResources bounds the keys no client watches that stay cached (and
	// subscribed upstream). Watched keys are never evicted. 0 keeps none
	// (as config's cache.max_resources); negative: unbounded.
	MaxResources int
	// MaxBytes bounds the bytes those unwatched keys hold (size.go: a
	// revision's body, names, fields, TTL and overhead, a key's resource
	// error). 0 keeps none; negative: unbounded.
	MaxBytes int64
	// Upstream receives subscribe/unsubscribe calls; may be set later with
	// SetUpstream, before the first Watch.
	Upstream Subscriber
	// Logger; New names it "cache". nil: no logging.
	Logger *zap.Logger
	// Registry for the cache metrics; nil: not registered.
	Registry prometheus.Registerer
	// Now is the clock (TTL expiry); nil: time.Now. For tests.
	Now func() time.Time
	// Validator, when set, checks each new revision of an Apply before it
	// is applied; a refused one is not (screen.go). nil: none.
	Validator Validator
	// Guard, when set, decides whether an origin change's removals are
	// deferred (screen.go, deferred.go). nil: never.
	Guard RemovalGuard
	// Gate, when set, says whether an origin change's new revisions roll
	// out, keeping the last accepted revision beside them (rollout.go).
	// nil: they never do.
	Gate Gate
	// RefetchInterval: a key whose revision the origin marked
	// do_not_cache is asked of the origin for a new watcher at most once
	// per interval (refetch.go); 0: no limit (as config's
	// cache.refetch_interval: 0).
	RefetchInterval time.Duration
	// Ledger, when set, records each Apply that brings new revisions
	// (internal/propagation) and points those revisions to the record;
	// nil: no records (config propagation.enabled false).
	Ledger *propagation.Ledger
	// AfterFunc arms the expiry timer with time.AfterFunc's contract: f
	// runs once, in its own goroutine, after d, unless the returned stop
	// reports that it stopped it first. nil: time.AfterFunc. For tests.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Cache holds resources by canonical Key, indexes watchers by key and by
// collection, and keeps unwatched keys in a bounded LRU.
//
// Contract:
//   - Watch registers w for keys (resources or collections). A key nobody
//     had subscribed is subscribed upstream (Subscriber.Subscribe, with node).
//     Each key already known (present or absent, or pending with the
//     origin's error: resourceerrors.go) counts as a cache hit, each other
//     pending one as a miss (xds_relay_cache_hits_total/misses_total, by
//     type). If a key is already known, w is notified of it (for a
//     collection: of each member, or of the collection key itself when it
//     is empty).
//     Watching a key w already watches does nothing.
//   - Unwatch removes w. A key no client watches moves to the LRU; it stays
//     cached and subscribed until evicted, and eviction calls Unsubscribe.
//     A resource that is a member of a watched collection counts as watched.
//   - Apply stores an origin update and notifies every watcher of each changed
//     key, and every watcher of a collection the key is (or was) a member of.
//     A collection whose state changes (pending → known, empty ↔ not empty)
//     notifies its watchers of the collection key (and, when it becomes known,
//     of each member).
//   - Lookup and LookupMembers read current state (lookup.go); writers
//     build responses from them.
//   - Nothing is dropped because the origin is unreachable: only LRU
//     eviction of unwatched keys ever drops an entry.
//
// Locking: mu guards every index. Watcher.Notify and Subscriber calls are
// made after mu is unlocked; Subscriber calls keep the order in which the
// cache decided them (see flush).
type Cache struct {
	lg        *zap.Logger                             // read-only after New
	m         *metrics                                // read-only after New
	now       func() time.Time                        // read-only after New
	afterFunc func(time.Duration, func()) func() bool // read-only after New
	validator Validator                               // read-only after New; nil: none
	guard     RemovalGuard                            // read-only after New; nil: none
	gate      Gate                                    // read-only after New; nil: none
	ledger    *propagation.Ledger                     // read-only after New; nil: off
	// timers counts the armed expiry timer and a firing in progress (Close
	// waits for them).
	timers sync.WaitGroup

	mu sync.Mutex
	// maxResources and maxBytes: Options' bounds, changed by SetBounds.
	// guarded by mu
	maxResources int
	maxBytes     int64
	upstream     Subscriber // guarded by mu
	// entries by key: resources and collections. guarded by mu
	entries map[Key]*entry
	// byType: resource entries (not collections) of one link and type, by
	// canonical name; the members of its Wildcard are the present ones.
	// guarded by mu
	byType map[linkType]map[string]*entry
	// colls: collection entries of one link and type, by name.
	// guarded by mu
	colls map[linkType]map[string]*entry
	// present counts the present resource entries of one link and type.
	// guarded by mu
	present map[linkType]int
	// globMembers: present resources by the glob key they belong to (kept
	// whether or not the glob is watched, so a new glob watch is O(members)).
	// guarded by mu
	globMembers map[Key]map[string]*entry
	// aliases: alias key → the resource entry whose current revision
	// lists it (aliases.go). guarded by mu
	aliases map[Key]*entry
	// watchers by exact key: resource keys, glob keys and Wildcard keys.
	// guarded by mu
	watchers map[Key]*watcherSet
	// recs: each watcher's record, where it stands in each set
	// (watchers.go). guarded by mu
	recs map[Watcher]*watcherRec
	// watchedKeys counts the keys of watchers per link (ForgetLink).
	// guarded by mu
	watchedKeys map[LinkID]int
	// lru orders unwatched keys, oldest first. guarded by mu
	lru *simplelru.LRU[Key, *entry]
	// lruBytes is the bytes of the resources in lru. guarded by mu
	lruBytes int64
	// outbox holds Subscriber calls decided under mu, in order; flushing
	// says one goroutine is draining it. guarded by mu
	outbox   []subOp
	flushing bool
	// expiries: present resources with a TTL, earliest expiry first.
	// guarded by mu
	expiries expiryHeap
	// timerStop stops the armed expiry timer (nil: none armed), due at
	// timerAt; timerGen numbers armings. guarded by mu
	timerStop func() bool
	timerAt   time.Time
	timerGen  uint64
	// closed: Close was called; no timer is armed any more. guarded by mu
	closed bool
	// totals mirrors the size gauges and hit/miss counters for Stats
	// (inspect.go); tally is the hits and misses of the Watch call in
	// progress, not yet in the metrics. guarded by mu
	totals Stats
	tally  hitTally
	// linkErr: the relay's UNAVAILABLE for the pending keys of a link
	// no origin answers (SetLinkError). guarded by mu
	linkErr map[LinkID]*statuspb.Status
	// gen counts changes to what the cache holds (applies, expiries,
	// drops): a snapshot is rewritten only when it moved. guarded by mu
	gen uint64
	// deferred: the entries whose removal is deferred, by link, type and
	// reason (deferred.go). guarded by mu
	deferred map[deferralGroup]map[*entry]struct{}
	// refetchInterval: at most one fetch of a do_not_cache key per
	// interval (refetch.go); 0: no limit. guarded by mu
	refetchInterval time.Duration
	// dueFetches: entries with a fetch delayed (entry.fetch); recent:
	// the dropped do_not_cache keys' last fetches. guarded by mu
	dueFetches map[*entry]struct{}
	recent     recentFetches
}

// New returns an empty cache.
func New(opts Options) *Cache {
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	afterFunc := opts.AfterFunc
	if afterFunc == nil {
		afterFunc = defaultAfterFunc
	}
	// The LRU only keeps order; the cache enforces both bounds itself (a
	// count and a byte total) and evicts with RemoveOldest, so no callback.
	lru, err := simplelru.NewLRU[Key, *entry](math.MaxInt, nil)
	if err != nil {
		panic("cache: simplelru.NewLRU: " + err.Error()) // only for size <= 0
	}
	return &Cache{
		lg:              lg.Named("cache"),
		m:               newMetrics(opts.Registry),
		now:             now,
		afterFunc:       afterFunc,
		ledger:          opts.Ledger,
		validator:       opts.Validator,
		guard:           opts.Guard,
		gate:            opts.Gate,
		maxResources:    opts.MaxResources,
		maxBytes:        opts.MaxBytes,
		refetchInterval: opts.RefetchInterval,
		upstream:        opts.Upstream,
		entries:         make(map[Key]*entry),
		byType:          make(map[linkType]map[string]*entry),
		present:         make(map[linkType]int),
		colls:           make(map[linkType]map[string]*entry),
		globMembers:     make(map[Key]map[string]*entry),
		watchers:        make(map[Key]*watcherSet),
		recs:            make(map[Watcher]*watcherRec),
		aliases:         make(map[Key]*entry),
		watchedKeys:     make(map[LinkID]int),
		linkErr:         make(map[LinkID]*statuspb.Status),
		deferred:        make(map[deferralGroup]map[*entry]struct{}),
		lru:             lru,
	}
}

// SetUpstream sets the subscriber; call before the first Watch.
func (c *Cache) SetUpstream(u Subscriber) {
	c.mu.Lock()
	c.upstream = u
	c.mu.Unlock()
}

// Watch registers w for keys; node is presented upstream if a link must be
// opened. Keys must be canonical (see CanonicalName).
func (c *Cache) Watch(w Watcher, node *corev3.Node, keys ...Key) {
	if len(keys) == 0 {
		return
	}
	nb := noteBuilder{hint: len(keys)}
	c.mu.Lock()
	now := c.now()
	rec := c.watcherRecLocked(w, len(keys))
	for _, k := range keys {
		ws := c.watchers[k]
		if ws.has(rec) {
			continue
		}
		if ws == nil {
			ws = &watcherSet{}
			c.watchers[k] = ws
			c.watchedKeys[k.Link]++
		}
		ws.add(rec)

		e := c.entries[k]
		if e == nil {
			e = c.newEntryLocked(k)
		}
		c.subscribeKeyLocked(e, node, now) // unless delayed: refetch.go
		if e.inLRU {
			c.reconcileLocked(e) // watched now: out of the LRU (else nothing to do)
		}
		if t := c.aliases[k]; t != nil {
			c.reconcileLocked(t) // watched through its alias now
		}
		if !e.collection && c.watchServedLocked(&nb, w, k, e, node, now) {
			continue // through an alias, or owed a fresh copy
		}
		if e.collection {
			c.watchCollectionLocked(&nb, w, e, now)
			continue
		}
		// A pending key with the origin's error is answered too.
		st := e.visibleState(now)
		answered := st != StatePending || e.err != nil
		c.countLocked(k, answered)
		if answered {
			nb.add(w, k)
		}
	}
	c.armLocked(now) // a fetch delayed (refetch.go)
	c.flushCountsLocked()
	c.mu.Unlock()
	c.flush()
	nb.send()
}

// watchCollectionLocked answers a new watch by w of collection e: its
// members are watched, and w is notified of each when the collection is
// known (of the collection key itself when it is known empty).
func (c *Cache) watchCollectionLocked(nb *noteBuilder, w Watcher, e *entry, now time.Time) {
	st := c.collectionStateLocked(e)
	c.countLocked(e.key, st != StatePending)
	for _, m := range c.membersLocked(e.key) {
		c.reconcileLocked(m)
		if st != StatePending && m.visibleState(now) == StatePresent {
			nb.add(w, m.key)
		}
	}
	if st == StateAbsent {
		nb.add(w, e.key)
	}
}

// Unwatch removes w from keys. Keys nobody watches any more stay cached
// (and subscribed) in the LRU until evicted.
func (c *Cache) Unwatch(w Watcher, keys ...Key) {
	c.mu.Lock()
	rec := c.recs[w]
	for _, k := range keys {
		ws := c.watchers[k]
		if !ws.has(rec) {
			continue
		}
		ws.remove(rec)
		if rec.owed {
			c.forgetOwedLocked(w, k)
		}
		if ws.size() > 0 {
			continue
		}
		delete(c.watchers, k)
		if c.watchedKeys[k.Link]--; c.watchedKeys[k.Link] <= 0 {
			delete(c.watchedKeys, k.Link)
		}
		e := c.entries[k]
		if e == nil {
			continue
		}
		c.reconcileLocked(e)
		if t := c.aliases[k]; t != nil {
			c.reconcileLocked(t)
		}
		if e.collection {
			for _, m := range c.membersLocked(k) {
				c.reconcileLocked(m)
			}
		}
	}
	c.dropRecLocked(rec)
	c.enforceBoundsLocked()
	c.mu.Unlock()
	c.flush()
}

// newEntryLocked creates the entry of a key a client watches for the first
// time. A resource that its known glob would hold, but does not, is known
// absent at once; one a known Wildcard lacks is pending (asked upstream).
func (c *Cache) newEntryLocked(k Key) *entry {
	e := &entry{key: k, state: StatePending}
	if isCollectionName(k.Name) {
		e.collection = true
		st := k.linkType()
		m := c.colls[st]
		if m == nil {
			m = make(map[string]*entry)
			c.colls[st] = m
		}
		m[k.Name] = e
	} else {
		e.glob = globOf(k.Name)
		if c.coveredByKnownLocked(k, e.glob) {
			e.state = StateAbsent
		}
		c.addByTypeLocked(e)
	}
	c.entries[k] = e
	return e
}

func (c *Cache) addByTypeLocked(e *entry) {
	st := e.key.linkType()
	m := c.byType[st]
	if m == nil {
		m = make(map[string]*entry)
		c.byType[st] = m
	}
	m[e.key.Name] = e
}

// removeCollectionLocked removes collection entry e from colls.
func (c *Cache) removeCollectionLocked(e *entry) {
	st := e.key.linkType()
	if m := c.colls[st]; m != nil {
		delete(m, e.key.Name)
		if len(m) == 0 {
			delete(c.colls, st)
		}
	}
}

// coveredByKnownLocked: k's glob, answered by the origin, would hold
// resource k if it existed. A known Wildcard is not enough: an origin may
// serve a name outside its wildcard, so a named key it lacks is asked of
// the origin, never inferred absent from it.
func (c *Cache) coveredByKnownLocked(k Key, glob string) bool {
	return glob != "" && c.knownLocked(c.globKey(k, glob))
}

// knownLocked: k is a collection the origin has answered.
func (c *Cache) knownLocked(k Key) bool {
	e := c.entries[k]
	return e != nil && e.collection && e.state == StatePresent
}

func (c *Cache) globKey(k Key, glob string) Key {
	return Key{Link: k.Link, TypeURL: k.TypeURL, Name: glob}
}

// membersLocked returns the entries that are members of collection k: the
// present resources of its glob, or every resource entry of its link and
// type for Wildcard (callers filter on state). The map must not be modified.
func (c *Cache) membersLocked(k Key) map[string]*entry {
	if k.Name == Wildcard {
		return c.byType[k.linkType()]
	}
	return c.globMembers[k]
}

// collectionStateLocked is a collection's reported state: pending until
// known, then present or absent by whether it has a present member (TTL
// expiry of members is not considered here). O(1).
func (c *Cache) collectionStateLocked(e *entry) State {
	if e.state != StatePresent {
		return StatePending
	}
	n := 0
	if e.key.Name == Wildcard {
		n = c.present[e.key.linkType()]
	} else {
		n = len(c.globMembers[e.key])
	}
	if n > 0 {
		return StatePresent
	}
	return StateAbsent
}

// countLocked records a cache hit or miss for a newly watched key: in
// totals at once, in the metrics by the Watch call's tally
// (flushCountsLocked), so a call of many keys looks its counters up once
// per type, not once per key.
func (c *Cache) countLocked(k Key, hit bool) {
	t := &c.tally
	if t.typeURL != k.TypeURL {
		c.flushCountsLocked()
		t.typeURL = k.TypeURL
	}
	if hit {
		c.totals.Hits++
		t.hits++
	} else {
		c.totals.Misses++
		t.misses++
	}
}

// flushCountsLocked adds the tally to the hit and miss metrics; Watch
// calls it before it unlocks.
func (c *Cache) flushCountsLocked() {
	t := &c.tally
	if t.hits > 0 {
		c.m.hits.WithLabelValues(xdstype.Label(t.typeURL)).Add(float64(t.hits))
	}
	if t.misses > 0 {
		c.m.misses.WithLabelValues(xdstype.Label(t.typeURL)).Add(float64(t.misses))
	}
	*t = hitTally{}
}

// hitTally is what countLocked has counted of one type and not yet added
// to the metrics.
type hitTally struct {
	typeURL      string
	hits, misses int
}

// watchedLocked: somebody watches e, directly or (for a present resource)
// through its glob or its type's Wildcard. Watched entries are never evicted.
func (c *Cache) watchedLocked(e *entry) bool {
	if c.watchers[e.key].size() > 0 {
		return true
	}
	if e.collection || e.state != StatePresent {
		return false
	}
	if c.watchers[e.key.linkType().wildcard()].size() > 0 || c.aliasHeldLocked(e) {
		return true
	}
	return e.glob != "" && c.watchers[c.globKey(e.key, e.glob)].size() > 0
}

// Versions returns, for the resources cached on link s of typeURL, the
// name the origin sent each under and the origin's version of it: what a
// delta stream sends as initial_resource_versions when it reconnects, so
// the origin does not resend what the relay already holds.
func (c *Cache) Versions(s LinkID, typeURL string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.byType[linkType{link: s, typeURL: typeURL}]
	out := make(map[string]string, len(es))
	for _, e := range es {
		if e.state == StatePresent {
			v := e.originVersion
			if v == "" {
				v = e.res.Version // e.g. from a file source: content is all there is
			}
			out[e.res.Name] = v
		}
	}
	return out
}

// ForgetLink forgets everything cached for link s when no client
// watches any key of it, and reports whether it did. Nothing is
// unsubscribed: the caller is closing s's upstream link (an idle link).
// A key watched later is a miss, subscribed anew.
func (c *Cache) ForgetLink(s LinkID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchedKeys[s] > 0 {
		return false
	}
	var gone []*entry
	for st, m := range c.byType {
		if st.link == s {
			for _, e := range m {
				gone = append(gone, e)
			}
		}
	}
	for st, m := range c.colls {
		if st.link == s {
			for _, e := range m {
				gone = append(gone, e)
			}
		}
	}
	delete(c.linkErr, s)
	for _, e := range gone {
		e.subscribed = false // the link goes: nothing to unsubscribe
		c.dropLocked(e)
		c.m.evictions.Inc()
	}
	return true
}

// Watched reports whether some client watches a key of link s.
func (c *Cache) Watched(s LinkID) bool { return c.WatchedKeys(s) > 0 }

// WatchedKeys returns how many keys of link s some client watches.
func (c *Cache) WatchedKeys(s LinkID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watchedKeys[s]
}

// Cached reports whether the cache holds a present resource of link s.
func (c *Cache) Cached(s LinkID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for st, n := range c.present {
		if st.link == s && n > 0 {
			return true
		}
	}
	return false
}
