package downstream

import (
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// One key per name. A client has one revision per name, so each name it
// sees must be fed by one cache key: the key the name resolves to for this
// client (its home: an xdstp name's authority and canonical form; a plain
// name's aggregation rule for the client's node). A name can also reach a
// client another way: as a member of a collection on another link (a
// plain-name group's wildcard lists one of its authority's xdstp names, or
// a plain name the rules give this client from another group), or as the
// resource an alias leads to. The upstream refuses another authority's
// xdstp names (internal/upstream, authority.go); what remains is the same
// authority's other link, or a plain name. Such a member or aliased
// resource is left out of the client's lookups when the client is fed the
// name from its home: subscribed to that key directly, or to a collection
// on the home link that has it. So the home copy is the only one the
// client is sent, and another link's copy never overwrites it, whatever
// that link's wildcard or aliases say. A name whose home the client does
// not watch is served from where the client found it, as before.
//
// A stream whose names of a type all map to one link (the common case) can
// meet no such conflict: every copy it is sent is read from that link, one
// key per name. linkSet keeps that check O(1); only a stream watching
// several links of a type pays a lookup per member.

// linkSet numbers the links of a type's subscriptions (sub.link) and
// counts the subscriptions on each. One link costs no slice; a number
// stays its link's while a subscription has it, and is taken again by
// another link once none does.
type linkSet struct {
	first cache.LinkID // link 0
	n     int32        // subscriptions on link 0
	more  []linkCount  // links 1 and up; nil until a second one
}

type linkCount struct {
	id cache.LinkID
	n  int32 // 0: free
}

// add counts a subscription on id and returns its number.
func (ls *linkSet) add(id cache.LinkID) uint32 {
	if ls.n > 0 && ls.first == id {
		ls.n++
		return 0
	}
	free := -1
	for i := range ls.more {
		switch m := &ls.more[i]; {
		case m.n > 0 && m.id == id:
			m.n++
			return uint32(i + 1)
		case m.n == 0 && free < 0:
			free = i
		}
	}
	switch {
	case ls.n == 0:
		ls.first, ls.n = id, 1
		return 0
	case free >= 0:
		ls.more[free] = linkCount{id: id, n: 1}
		return uint32(free + 1)
	}
	ls.more = append(ls.more, linkCount{id: id, n: 1})
	return uint32(len(ls.more))
}

// remove takes back a subscription on link number ref.
func (ls *linkSet) remove(ref uint32) {
	if ref == 0 {
		ls.n--
		return
	}
	ls.more[ref-1].n--
	for len(ls.more) > 0 && ls.more[len(ls.more)-1].n == 0 {
		ls.more[len(ls.more)-1] = linkCount{}
		ls.more = ls.more[:len(ls.more)-1]
	}
	if len(ls.more) == 0 {
		ls.more = nil
	}
}

// id is link number ref.
func (ls *linkSet) id(ref uint32) cache.LinkID {
	if ref == 0 {
		return ls.first
	}
	return ls.more[ref-1].id
}

// several: the type's subscriptions map to more than one link.
func (ls *linkSet) several() bool {
	n := 0
	if ls.n > 0 {
		n++
	}
	for _, m := range ls.more {
		if m.n > 0 {
			if n++; n > 1 {
				return true
			}
		}
	}
	return false
}

// oneKeyLocked leaves out of w's lookups the collection members and
// aliased resources the client is fed from their home key instead
// (shadowedLocked).
func (ss *session) oneKeyLocked(w *work) {
	ts := w.ts
	if !ts.links.several() {
		return
	}
	keep := w.probes[:0]
	for _, p := range w.probes {
		switch {
		case !p.collection:
			if own := aliasedName(&p); own != "" && ss.shadowedLocked(ts, own, p.key.Link) {
				continue // pending, as a denied alias is
			}
		case p.member:
			if p.state == cache.StatePresent && ss.shadowedLocked(ts, p.res.Name, p.key.Link) {
				continue
			}
		default:
			p.members = filterMembers(p.members, func(r *cache.Resource) bool {
				return !ss.shadowedLocked(ts, r.Name, p.key.Link)
			})
		}
		keep = append(keep, p)
	}
	clear(w.probes[len(keep):])
	w.probes = keep
}

// shadowedLocked: name, read from a key of link from, has another home key
// for this client, which feeds the client the name.
func (ss *session) shadowedLocked(ts *typeState, name string, from cache.LinkID) bool {
	home, err := ss.srv.resolve(ts.typeURL, name, ss.node)
	if err != nil || home.Collection || home.Key.Link == from {
		return false
	}
	return ts.feedsLocked(home.Key)
}

// feedsLocked: the client is fed resource key k: subscribed to it, by
// any spelling, or to a collection on its link that has it.
func (ts *typeState) feedsLocked(k cache.Key) bool {
	if ts.watchesLocked(k, "") {
		return true
	}
	for _, c := range ts.colls {
		if c.key.Link == k.Link && c.contains(k) {
			return true
		}
	}
	return false
}

// fetchShadowed is shadowedLocked for a unary Fetch or REST poll of items
// (judged by fa): name, a member of a collection on link from, is left
// out when the poll also asks for its home key, or for a collection on
// the home link that has it.
func (s *Server) fetchShadowed(fa *fetchAccess, items []fetchItem, name string, from cache.LinkID) bool {
	several := false
	for _, it := range items {
		several = several || it.res.Key.Link != from
	}
	if !several {
		return false
	}
	home, err := s.resolve(fa.typeURL, name, fa.node)
	if err != nil || home.Collection || home.Key.Link == from {
		return false
	}
	for _, it := range items {
		if it.res.Key == home.Key || (it.res.Collection && it.res.Key.Link == home.Key.Link && collectionHolds(it.res.Key, home.Key)) {
			return true
		}
	}
	return false
}

// collectionHolds reports whether resource key k belongs to collection
// coll of its link (sub.contains, for a collection not subscribed).
func collectionHolds(coll, k cache.Key) bool {
	c := subExt{key: coll}
	if coll.Name != cache.Wildcard {
		g, err := xdsname.Parse(coll.Name)
		if err != nil {
			return false
		}
		c.glob = &g
	}
	return c.contains(k)
}
