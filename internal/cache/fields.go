package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// The origin's Resource wrapper fields beside the body (aliases, metadata,
// cache_control): kept with each revision, part of its version, written
// to the snapshot, passed on to clients. Two of them change what the
// cache does:
//
//   - aliases: other names the resource goes by (VHDS: a client
//     subscribes "routeconfig/domain"; the origin answers with the
//     virtual host under its own name, the domain among its aliases). A
//     watched key that is an alias of a present resource reads as that
//     resource (Get) and is notified when it changes. The alias
//     index holds at most maxIndexedAliases aliases per resource; the
//     latest revision to claim an alias wins it.
//   - cache_control.do_not_cache: the revision is never shared from cache
//     with a later client. It is dropped as soon as nobody watches it
//     (never kept in the LRU, so never restored), never written to the
//     snapshot, and a new watcher of it while others watch it is owed a
//     fresh copy: the cache asks the origin again (unsubscribe and
//     subscribe the key, as the upstream's liveness probe does) and the
//     revision is withheld from that watcher (Withheld) until the origin
//     answers.

// CacheControl is the origin's Resource.cache_control.
type CacheControl = discoveryv3.Resource_CacheControl

// maxIndexedAliases bounds the aliases of one revision the cache serves
// watchers of alias keys by (all of them are passed on to clients).
const maxIndexedAliases = 64

// HasFields reports whether r carries aliases, metadata or cache control.
func (r *Resource) HasFields() bool {
	return r != nil && (len(r.Aliases) > 0 || r.Metadata != nil || r.CacheControl != nil)
}

// DoNotCache reports whether the origin marked r cache_control.do_not_cache.
func (r *Resource) DoNotCache() bool {
	return r != nil && r.CacheControl.GetDoNotCache()
}

// RevisionVersion is the relay's version of revision r: ContentVersion of
// its body when it carries none of the wrapper fields (go-control-plane's
// own delta version of those bytes), otherwise a hex SHA-256 of the body
// and the fields' deterministic encoding, so a change of metadata alone is
// a new version.
func RevisionVersion(r *Resource) string {
	if !r.HasFields() {
		return ContentVersion(r.Body)
	}
	body := r.Body.GetValue()
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(body))))
	h.Write(body)
	h.Write(EncodeFields(r))
	return hex.EncodeToString(h.Sum(nil))
}

// EncodeFields is the deterministic encoding of r's wrapper fields (as a
// Resource message holding only them); nil when it has none. It is part of
// RevisionVersion, and what a snapshot record stores (package snapshot).
func EncodeFields(r *Resource) []byte {
	if !r.HasFields() {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&discoveryv3.Resource{
		Aliases: r.Aliases, Metadata: r.Metadata, CacheControl: r.CacheControl,
	})
	if err != nil {
		// Cannot happen for messages decoded from the wire; the body
		// still versions the revision.
		return nil
	}
	return b
}

// DecodeFields sets r's wrapper fields from EncodeFields' bytes (a
// snapshot record's).
func DecodeFields(b []byte, r *Resource) error {
	if len(b) == 0 {
		return nil
	}
	var w discoveryv3.Resource
	if err := proto.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("resource fields: %w", err)
	}
	r.Aliases, r.Metadata, r.CacheControl = w.GetAliases(), w.GetMetadata(), w.GetCacheControl()
	return nil
}

// aliasKeys returns the keys of r's aliases on e's stream and type, at
// most maxIndexedAliases: canonical, neither e's own key nor a collection,
// and owned by e's link (authority.go): an alias never names another
// authority's key.
func aliasKeys(e *entry, r *Resource) []Key {
	if r == nil || len(r.Aliases) == 0 || e.collection {
		return nil
	}
	var out []Key
	for _, a := range r.Aliases {
		if len(out) == maxIndexedAliases {
			break
		}
		c, err := CanonicalName(a)
		if err != nil || c == e.key.Name || isCollectionName(c) || !e.key.Link.Owns(c) {
			continue
		}
		out = append(out, Key{Link: e.key.Link, TypeURL: e.key.TypeURL, Name: c})
	}
	return out
}

// indexAliasesLocked moves e's aliases in the alias index from revision
// old to revision cur (nil: none).
func (c *Cache) indexAliasesLocked(e *entry, old, cur *Resource) {
	if old == cur || (len(old.aliasesOrNil()) == 0 && len(cur.aliasesOrNil()) == 0) {
		return
	}
	for _, k := range aliasKeys(e, old) {
		if c.aliases[k] == e {
			delete(c.aliases, k)
		}
	}
	for _, k := range aliasKeys(e, cur) {
		c.aliases[k] = e
	}
}

func (r *Resource) aliasesOrNil() []string {
	if r == nil {
		return nil
	}
	return r.Aliases
}

// noteAliasesLocked records, as changes of a, the watched alias keys of
// e's current revision (their watchers read e through them). Called before
// and after e changes, so both the old and the new aliases are told.
func (c *Cache) noteAliasesLocked(a *applyRun, e *entry) {
	if e.state != StatePresent {
		return
	}
	for _, k := range aliasKeys(e, e.res) {
		if c.aliases[k] == e && c.watchers[k].size() > 0 {
			a.change(k, false)
		}
	}
}

// aliasHeldLocked: some client watches an alias key served by e.
func (c *Cache) aliasHeldLocked(e *entry) bool {
	for _, k := range aliasKeys(e, e.res) {
		if c.aliases[k] == e && c.watchers[k].size() > 0 {
			return true
		}
	}
	return false
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

// answerOwedLocked: the origin sent e's resource again (r). The watchers
// owed a fresh copy of it are owed no more; when r is unchanged they are
// told (nobody else is), otherwise the change tells everyone.
func (c *Cache) answerOwedLocked(a *applyRun, e *entry, r *Resource) {
	if len(e.waiting) == 0 {
		return
	}
	if e.state == StatePresent && identical(e.res, r) {
		for w, k := range e.waiting {
			a.owed = append(a.owed, note{w: w, k: k})
		}
	}
	e.waiting = nil
}

// oweFreshLocked: w starts watching k, which reads as e's do_not_cache
// revision. w is owed a copy from the origin: the revision is withheld
// from it (Withheld) until the origin sends e again, and k is asked of the
// origin again (unsubscribed and subscribed: the upstream has the origin
// forget and resend it), at most once per refetch interval (refetch.go).
// Reports whether w is now owed one.
func (c *Cache) oweFreshLocked(w Watcher, k Key, e *entry, node *corev3.Node, now time.Time) bool {
	if e == nil || !e.res.DoNotCache() {
		return false
	}
	joined := len(e.waiting) > 0 // a fetch for earlier watchers is under way
	if e.waiting == nil {
		e.waiting = make(map[Watcher]Key)
	}
	e.waiting[w] = k
	if r := c.recs[w]; r != nil {
		r.owed = true // its Unwatch looks for what it is owed
	}
	if ke := c.entries[k]; ke != nil && ke.subscribed {
		c.refetchLocked(ke, node, joined, now) // at most one per interval: refetch.go
	}
	return true
}

// forgetOwedLocked: w no longer watches k.
func (c *Cache) forgetOwedLocked(w Watcher, k Key) {
	for _, e := range []*entry{c.entries[k], c.aliases[k]} {
		if e != nil && e.waiting[w] == k {
			delete(e.waiting, w)
		}
	}
}

// Withheld reports whether r, a do_not_cache revision read for k (Get),
// must not be sent to watcher w now: w is owed a fresh copy of it from the
// origin, or r is no longer what k reads as (w is being told of the newer
// state). w is notified of k when it may be sent.
func (c *Cache) Withheld(w Watcher, k Key, r *Resource) bool {
	if !r.DoNotCache() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.servingLocked(k, c.now())
	if e == nil || e.res != r {
		return true
	}
	_, owed := e.waiting[w]
	return owed
}

// watchServedLocked answers a new watch by w of resource key k (entry e)
// when another entry serves it or it is owed fresh: the resource k is an
// alias of (a hit, notified at once), or a do_not_cache revision (a miss:
// asked of the origin again). It reports whether it answered; if not, k
// is answered by its own entry as any key is.
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
