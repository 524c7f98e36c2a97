package downstream

import (
	"context"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdsname"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Access control: who may subscribe to what (internal/access decides).
// A session's identity is the SANs of its verified client certificate,
// read once when the stream opens, plus the node its first request carries
// (a claim). The decision for an (authority, type) is the same for every
// name in it, so a session looks it up once and keeps it (accessKey)
// until the node or the policy changes.
//
// A denied name the client asked for explicitly ends the stream with
// PermissionDenied naming the authority and type, never the name, so the
// answer is the same whether the resource exists or not. A denied
// collection (a glob, the wildcard) is answered as if it did not exist:
// the glob in removed_resources (delta), the wildcard left out. Unary
// Fetch and REST polling answer PermissionDenied (HTTP 403).
//
// A member of a collection is checked against its own authority's rules,
// not the collection's: an origin that serves two authorities may list, in
// a wildcard answer, plain names the rules give to the other one (another
// authority's xdstp names it may not: the upstream refuses them). An
// xdstp member's authority is its name's; a legacy member's, the one its
// aggregation rule resolves to for the client's node (memberAuthority).
// A denied member is left out as if it did not exist, on every path
// (streams, Fetch, REST). The check costs nothing for a client that no
// authority of the type denies anything (DeniesAny, cached per session
// and type); otherwise one cached decision per (authority, type), plus a
// rule match for a legacy member.

// SetAccess replaces the access policy (nil: every client may subscribe to
// everything). Sessions look it up again for their next subscriptions,
// and every open stream that has a subscription the new policy denies,
// a resource whose authority now denies it, or whose node the new
// policy's node check refuses, is ended with PermissionDenied (the client
// reconnects and is answered as the new rules say); streams the change
// does not affect go on untouched. When SetAccess returns, a stream it
// ended has been sent its status and no response starts on it (one
// already queued reaches the client first), and Fetch and REST long polls
// still waiting are checked again: denied, they answer PermissionDenied
// (HTTP 403). It returns how many streams it ended. Safe to call while
// serving.
func (s *Server) SetAccess(p *access.Policy) int {
	s.access.Store(p)
	ended := 0
	for _, ss := range s.listSessions() {
		if err := ss.recheck(p); err != nil {
			ss.fail(err)
			ended++
		}
	}
	// After the sessions: a long poll woken now finds p in place.
	close(*s.accessChanged.Swap(newAccessChanged()))
	return ended
}

func newAccessChanged() *chan struct{} {
	ch := make(chan struct{})
	return &ch
}

// accessChange returns a channel closed by the next SetAccess.
func (s *Server) accessChange() <-chan struct{} { return *s.accessChanged.Load() }

// recheck applies pol to what the session already has: the status that
// ends it when pol denies one of its subscriptions, a resource it has or
// its node, nil otherwise. A session it ends is stopped before the lock is
// let go, so its writer starts no Send afterwards (sendAll).
func (ss *session) recheck(pol *access.Policy) error {
	ss.mu.Lock()
	id := ss.identityLocked()
	var nodeErr error
	if pol.ChecksNode() && ss.types.len() > 0 {
		nodeErr = pol.CheckNode(&id)
	}
	authority, typeURL, denied := ss.deniedHeldLocked(pol)
	if nodeErr != nil || denied {
		ss.stopped.Store(true)
	}
	lg := ss.loggerLocked()
	ss.mu.Unlock()
	if nodeErr != nil {
		return ss.srv.nodeDenied(lg, &id, nodeErr)
	}
	if denied {
		return ss.srv.denied(lg, authority, typeURL, "")
	}
	return nil
}

// deniedHeldLocked finds an (authority, type) pol denies the session that
// it subscribes to, or has a resource of through a collection or an
// alias.
func (ss *session) deniedHeldLocked(pol *access.Policy) (authority, typeURL string, denied bool) {
	for _, ts := range ss.types.all() {
		for n, s := range ts.subs.all() {
			if k := ts.keyOf(n, s); !ss.allowedLocked(pol, k.Link.Authority, k.TypeURL) {
				return k.Link.Authority, k.TypeURL, true
			}
		}
	}
	for _, ts := range ss.types.all() {
		if len(ts.via) == 0 || !ss.deniesAnyLocked(pol, ts.typeURL) {
			continue
		}
		for n, s := range ts.subs.all() {
			via := ts.viaOf(n, s)
			if via == "" {
				continue
			}
			if a, ok := ss.memberAuthorityLocked(pol, ts.typeURL, via, ts.keyOf(n, s).Link); !ok {
				return a, ts.typeURL, true
			}
		}
	}
	for _, ts := range ss.types.all() {
		if len(ts.colls) == 0 || !ss.deniesAnyLocked(pol, ts.typeURL) {
			continue
		}
		for name, h := range ts.sent.all() {
			if h.res == nil || h.absent {
				continue // not sent by the relay: nothing to take back
			}
			if s, ok := ts.subs.get(name); ok && !s.collection {
				continue // subscribed by name: its key was checked above
			}
			for _, c := range ts.colls {
				if _, member := c.members[name]; !member {
					continue
				}
				if a, ok := ss.memberAuthorityLocked(pol, ts.typeURL, name, c.key.Link); !ok {
					return a, ts.typeURL, true
				}
			}
		}
	}
	return "", "", false
}

// accessKey is one cached decision of a session: whether it may receive
// typeURL names of authority, or (anyAuthority) whether some authority
// denies it typeURL names.
type accessKey struct {
	authority, typeURL string
	anyAuthority       bool
}

// certIdentity returns the SANs of the stream's verified client
// certificate (none without mutual TLS).
func certIdentity(ctx context.Context) access.Identity {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return access.Identity{}
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return access.Identity{}
	}
	return access.FromTLS(&ti.State)
}

// identityLocked is the session's identity: its certificate's SANs and
// its node's id and cluster.
func (ss *session) identityLocked() access.Identity {
	var id access.Identity
	if ss.cert != nil {
		id = *ss.cert
	}
	return id.WithNode(ss.node.GetId(), ss.node.GetCluster())
}

// allowed reports whether the session may subscribe to typeURL names of
// authority, from its cache of decisions when the policy has not changed.
func (ss *session) allowed(authority, typeURL string) bool {
	pol := ss.srv.access.Load()
	if !pol.Restricted(authority, typeURL) {
		return true
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.allowedLocked(pol, authority, typeURL)
}

// allowedLocked is allowed under pol.
func (ss *session) allowedLocked(pol *access.Policy, authority, typeURL string) bool {
	if !pol.Restricted(authority, typeURL) {
		return true
	}
	return ss.decideLocked(pol, accessKey{authority: authority, typeURL: typeURL}, func(id *access.Identity) bool {
		return pol.Allowed(authority, typeURL, id)
	})
}

// deniesAnyLocked reports whether pol denies the session some
// authority's names of typeURL: only then are collection members checked
// one by one.
func (ss *session) deniesAnyLocked(pol *access.Policy, typeURL string) bool {
	if pol == nil {
		return false
	}
	return ss.decideLocked(pol, accessKey{typeURL: typeURL, anyAuthority: true}, func(id *access.Identity) bool {
		return pol.DeniesAny(typeURL, id)
	})
}

// decideLocked returns the cached decision k under pol, making it with
// decide (given the session's identity) when there is none.
func (ss *session) decideLocked(pol *access.Policy, k accessKey, decide func(*access.Identity) bool) bool {
	if ss.decidedBy != pol {
		ss.decisions = nil
		ss.decidedBy = pol
	}
	if ok, cached := ss.decisions[k]; cached {
		return ok
	}
	id := ss.identityLocked()
	ok := decide(&id)
	if ss.decisions == nil {
		ss.decisions = make(map[accessKey]bool)
	}
	ss.decisions[k] = ok
	return ok
}

// memberAuthorityLocked reports whether the session may receive name, a
// member of a collection of typeURL on stream coll, under pol; it returns
// the member's authority.
func (ss *session) memberAuthorityLocked(pol *access.Policy, typeURL, name string, coll cache.LinkID) (string, bool) {
	a, ok := ss.srv.memberAuthority(typeURL, name, coll, ss.node)
	return a, ok && ss.allowedLocked(pol, a, typeURL)
}

// checkMembersLocked leaves out of w's lookups the collection members pol
// does not let the session receive, so they are neither sent nor kept:
// the client learns nothing of them, not even that they exist. A name
// answered by alias (alias.go) is a resource of another name, maybe of
// another authority: it is checked by its own name as a member is, and
// left pending when denied.
func (ss *session) checkMembersLocked(pol *access.Policy, w *work) {
	typeURL := w.ts.typeURL
	aliases := ss.variant == xdstype.Delta // only delta answers by alias
	if (len(w.ts.colls) == 0 && !aliases) || !ss.deniesAnyLocked(pol, typeURL) {
		return
	}
	keep := w.probes[:0]
	for _, p := range w.probes {
		switch {
		case !p.collection:
			if !aliases {
				break
			}
			if own := aliasedName(&p); own != "" {
				if _, ok := ss.memberAuthorityLocked(pol, typeURL, own, p.key.Link); !ok {
					continue
				}
			}
		case p.member:
			if p.state == cache.StatePresent {
				if _, ok := ss.memberAuthorityLocked(pol, typeURL, p.res.Name, p.key.Link); !ok {
					continue
				}
			}
		default:
			p.members = filterMembers(p.members, func(r *cache.Resource) bool {
				_, ok := ss.memberAuthorityLocked(pol, typeURL, r.Name, p.key.Link)
				return ok
			})
		}
		keep = append(keep, p)
	}
	clear(w.probes[len(keep):])
	w.probes = keep
}

// filterMembers returns the members ok keeps; rs itself (the cache's)
// when it keeps them all, else a copy.
func filterMembers(rs []*cache.Resource, ok func(*cache.Resource) bool) []*cache.Resource {
	for i, r := range rs {
		if ok(r) {
			continue
		}
		out := append(make([]*cache.Resource, 0, len(rs)-1), rs[:i]...)
		for _, r := range rs[i+1:] {
			if ok(r) {
				out = append(out, r)
			}
		}
		return out
	}
	return rs
}

// memberAuthority returns the authority whose rules govern name, a member
// of a collection of typeURL on stream coll: an xdstp name's own
// authority; a legacy name's, the one its aggregation rule resolves to for
// node (the collection's when no rule takes it or that authority does not
// carry the type: it is served only through the collection). ok is false
// for an xdstp name whose authority does not parse.
func (s *Server) memberAuthority(typeURL, name string, coll cache.LinkID, node *corev3.Node) (authority string, ok bool) {
	if xdsname.IsXDSTP(name) {
		a, err := xdsname.AuthorityOf(name)
		return a, err == nil
	}
	r, err := s.resolve(typeURL, name, node)
	if err != nil {
		return coll.Authority, true
	}
	return r.Key.Link.Authority, true
}

// forgetDecisionsLocked drops the cached decisions: the node changed.
func (ss *session) forgetDecisionsLocked() { ss.decisions = nil }

// checkNode applies downstream.node_identity once per session (and again
// when the policy changes): PermissionDenied when the node the client
// claims is not the one its certificate names.
func (ss *session) checkNode() error {
	pol := ss.srv.access.Load()
	if !pol.ChecksNode() {
		return nil
	}
	ss.mu.Lock()
	if ss.nodeCheckedBy == pol {
		ss.mu.Unlock()
		return nil
	}
	id := ss.identityLocked()
	ss.mu.Unlock()
	if err := pol.CheckNode(&id); err != nil {
		return ss.srv.nodeDenied(ss.logger(), &id, err)
	}
	ss.mu.Lock()
	ss.nodeCheckedBy = pol
	ss.mu.Unlock()
	return nil
}

// nodeDenied counts and logs a node that does not match its certificate,
// and returns the status that ends the request.
func (s *Server) nodeDenied(lg *zap.Logger, id *access.Identity, err error) error {
	s.m.nodeDenied.Inc()
	lg.Warn("client node does not match its certificate", zap.String("node_id", clientText(id.NodeID)),
		zap.String("node_cluster", clientText(id.NodeCluster)), zap.Strings("uri_sans", id.URISANs), zap.Error(err))
	return status.Errorf(codes.PermissionDenied, "%v: node id %s cluster %s (downstream.node_identity)",
		access.ErrNodeMismatch, quoteShort(id.NodeID), quoteShort(id.NodeCluster))
}

// denied counts and logs a denied subscription and returns the status of
// an explicit one: it names the authority and type, not the resource.
func (s *Server) denied(lg *zap.Logger, authority, typeURL, name string) error {
	s.m.accessDenied.WithLabelValues(typeLabel(typeURL), authority).Inc()
	lg.Warn("subscription denied by access rules", zap.String("authority", authority),
		zap.String("type_url", clientText(typeURL)), zap.String("name", clientText(name)))
	return status.Errorf(codes.PermissionDenied, "%v: authority %s, type %s", ErrAccessDenied, quoteShort(authority), quoteShort(typeURL))
}

// checkFetch applies pol's access rules to one name of a unary Fetch or
// REST poll (id: its certificate and its request's node): a denied
// explicit name is PermissionDenied; skip reports a denied collection,
// left out of the answer.
func (s *Server) checkFetch(pol *access.Policy, id *access.Identity, r Resolution, typeURL, name string) (skip bool, err error) {
	if !pol.Restricted(r.Key.Link.Authority, typeURL) || pol.Allowed(r.Key.Link.Authority, typeURL, id) {
		return false, nil
	}
	st := s.denied(s.lg, r.Key.Link.Authority, typeURL, name)
	if r.Collection {
		return true, nil
	}
	return false, st
}

// fetchAccess is what one Fetch or REST poll is judged by: the policy in
// use, the client's identity and node.
type fetchAccess struct {
	pol     *access.Policy
	id      access.Identity
	node    *corev3.Node
	typeURL string
	// denies: pol denies the client some authority's names of typeURL, so
	// collection members are checked one by one.
	denies bool
}

func (s *Server) fetchAccess(typeURL string, id access.Identity, node *corev3.Node) *fetchAccess {
	pol := s.access.Load()
	fa := &fetchAccess{pol: pol, id: id, node: node, typeURL: typeURL}
	fa.denies = pol.DeniesAny(typeURL, &fa.id)
	return fa
}

// checkNode applies downstream.node_identity to the poll's node.
func (fa *fetchAccess) checkNode(s *Server) error {
	if !fa.pol.ChecksNode() {
		return nil
	}
	if err := fa.pol.CheckNode(&fa.id); err != nil {
		return s.nodeDenied(s.lg, &fa.id, err)
	}
	return nil
}

// recheck judges a waiting poll's names again under fa's policy (a reload
// changed it): PermissionDenied when it denies the node or any name the
// poll waits on, its collections included, as a stream having them is
// ended.
func (fa *fetchAccess) recheck(s *Server, items []fetchItem) error {
	if err := fa.checkNode(s); err != nil {
		return err
	}
	for _, it := range items {
		a := it.res.Key.Link.Authority
		if !fa.pol.Allowed(a, fa.typeURL, &fa.id) {
			return s.denied(s.lg, a, fa.typeURL, "")
		}
	}
	return nil
}

// memberAllowed reports whether the client may receive name, a member of
// a collection on stream coll (memberAuthority).
func (fa *fetchAccess) memberAllowed(s *Server, coll cache.LinkID, name string) bool {
	if !fa.denies {
		return true
	}
	a, ok := s.memberAuthority(fa.typeURL, name, coll, fa.node)
	return ok && fa.pol.Allowed(a, fa.typeURL, &fa.id)
}
