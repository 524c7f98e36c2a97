package downstream

import (
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Upstream links (groups). Each name a client asks for is served on one
// upstream link (cache.LinkID: its authority and aggregation group), and a
// link is an origin stream kept open until it has been idle a while. A rule
// that groups by something a client chooses (the resource name, as
// migrate-rules writes for the earlier relay's resource-name grouping)
// would let one stream open a link per name. So before a request
// subscribes anything, every link its names need that is not open is
// given a place among its authority's (Options.Links, kept by
// internal/upstream, which opens links; downstream never imports it), at
// most Limits.MaxGroupsPerAuthority; and a stream may cause at most
// Limits.MaxNewGroupsPerStream links to open over its life (a unary Fetch
// or REST poll: per request). Links already open cost nothing. Past
// either, the stream ends with ResourceExhausted naming the limit
// (counted in xds_relay_downstream_limit_rejections_total{limit}), and the
// places the request kept are given back: it subscribes nothing, and
// what other clients use is untouched.

// requestLinks is the distinct links of one request, in order of first use.
type requestLinks struct {
	ids  []cache.LinkID
	seen map[cache.LinkID]struct{} // once there are more than manyProbes
}

func (l *requestLinks) add(id cache.LinkID) {
	if l.seen != nil {
		if _, dup := l.seen[id]; dup {
			return
		}
		l.seen[id] = struct{}{}
	} else if slices.Contains(l.ids, id) {
		return
	}
	l.ids = append(l.ids, id)
	if l.seen == nil && len(l.ids) > manyProbes {
		l.seen = make(map[cache.LinkID]struct{}, 2*len(l.ids))
		for _, x := range l.ids {
			l.seen[x] = struct{}{}
		}
	}
}

// Links is what a Server needs of the upstream links; internal/upstream's
// Manager implements it (the relay wires it in).
type Links interface {
	// ReserveLink keeps id's link a place among its authority's: ok when
	// it is open or has one, or when fewer than max links of the
	// authority are (then a place is kept for it: opened).
	ReserveLink(id cache.LinkID, max int) (opened, ok bool)
	// UnreserveLink gives back the place kept for id, if no link took it.
	UnreserveLink(id cache.LinkID)
}

// admitLinks gives each link of ids that is not open a place among its
// authority's (Links.ReserveLink), counting in *opened those the stream
// caused to open. Past MaxNewGroupsPerStream, or the authority's
// MaxGroupsPerAuthority, it gives back the places it kept (the request
// subscribes nothing) and returns the status that ends the stream.
func (s *Server) admitLinks(ids []cache.LinkID, opened *int) error {
	if s.links == nil {
		return nil
	}
	lim := s.limits()
	var kept []cache.LinkID
	for _, id := range ids {
		room := *opened+len(kept) < lim.MaxNewGroupsPerStream
		max := lim.MaxGroupsPerAuthority
		if !room {
			max = 0 // only links already open
		}
		got, ok := s.links.ReserveLink(id, max)
		if got {
			kept = append(kept, id)
		}
		if ok {
			continue
		}
		for _, k := range kept {
			s.links.UnreserveLink(k)
		}
		if !room {
			return s.overLimit(limitNewGroupsPerStream, codes.ResourceExhausted,
				"this request would make the stream cause more than %d upstream links (aggregation groups) to open, the limit (downstream.limits.max_new_groups_per_stream); authority %s group %s refused",
				lim.MaxNewGroupsPerStream, quoteShort(id.Authority), quoteShort(id.Group))
		}
		return s.overLimit(limitGroupsPerAuthority, codes.ResourceExhausted,
			"authority %s has %d upstream links (aggregation groups) open, its limit (downstream.limits.max_groups_per_authority); group %s refused: try later",
			quoteShort(id.Authority), lim.MaxGroupsPerAuthority, quoteShort(id.Group))
	}
	*opened += len(kept)
	return nil
}

// admitResolved admits the links the names of rs that resolved need, for
// this stream (newGroups).
func (ss *session) admitResolved(rs []resolved) error {
	var room [2]cache.LinkID
	l := requestLinks{ids: room[:0]}
	for _, r := range rs {
		if r.err == nil {
			l.add(r.res.Key.Link)
		}
	}
	return ss.srv.admitLinks(l.ids, &ss.newGroups)
}

// admitFetch admits the links a fetch's items need: a fetch is one
// request, and causes at most MaxNewGroupsPerStream links to open.
func (s *Server) admitFetch(items []fetchItem) error {
	var room [2]cache.LinkID
	l := requestLinks{ids: room[:0]}
	for _, it := range items {
		l.add(it.res.Key.Link)
	}
	opened := 0
	return s.admitLinks(l.ids, &opened)
}
