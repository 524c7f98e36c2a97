package downstream

import (
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// One key per name. A client holds one revision per name, so each name it
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
// on the home link that holds it. So the home copy is the only one the
// client is sent, and another link's copy never overwrites it, whatever
// that link's wildcard or aliases say. A name whose home the client does
// not watch is served from where the client found it, as before.
//
// A stream whose names of a type all map to one link (the common case) can
// meet no such conflict: every copy it is sent is read from that link, one
// key per name. linkSet keeps that check O(1); only a stream watching
// several links of a type pays a lookup per member.

// linkSet counts a type's subscriptions by the link of their key. One
// link costs no map.
type linkSet struct {
	first cache.LinkID
	n     int                  // subscriptions on first
	more  map[cache.LinkID]int // subscriptions on the others; nil until one
}

func (ls *linkSet) add(id cache.LinkID) {
	switch {
	case ls.n == 0:
		ls.first, ls.n = id, 1
	case id == ls.first:
		ls.n++
	default:
		if ls.more == nil {
			ls.more = make(map[cache.LinkID]int)
		}
		ls.more[id]++
	}
}

func (ls *linkSet) remove(id cache.LinkID) {
	if id != ls.first {
		if ls.more[id]--; ls.more[id] <= 0 {
			delete(ls.more, id)
		}
		return
	}
	if ls.n--; ls.n > 0 {
		return
	}
	for other, n := range ls.more { // another link becomes the first
		ls.first, ls.n = other, n
		delete(ls.more, other)
		break
	}
	if len(ls.more) == 0 {
		ls.more = nil
	}
}

// several: the type's subscriptions map to more than one link.
func (ls *linkSet) several() bool { return len(ls.more) > 0 }

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
// any spelling, or to a collection on its link that holds it.
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
// the home link that holds it.
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
	s := sub{key: coll}
	if coll.Name != cache.Wildcard {
		g, err := xdsname.Parse(coll.Name)
		if err != nil {
			return false
		}
		s.glob = &g
	}
	return s.contains(k)
}
