package downstream

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
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

// SetAccess replaces the access policy (nil: every client may subscribe to
// everything). Sessions look it up again for their next subscriptions,
// and every open stream that holds a subscription the new policy denies,
// or whose node the new policy's node check refuses, is ended with
// PermissionDenied (the client reconnects and is answered as the new
// rules say); streams the change does not affect go on untouched. It
// returns how many streams it ended. Safe to call while serving.
func (s *Server) SetAccess(p *access.Policy) int {
	s.access.Store(p)
	ended := 0
	for _, ss := range s.snapshotSessions() {
		if err := ss.recheck(p); err != nil {
			ss.fail(err)
			ended++
		}
	}
	return ended
}

// recheck applies pol to what the session already holds: the status that
// ends it when pol denies one of its subscriptions or its node, nil
// otherwise.
func (ss *session) recheck(pol *access.Policy) error {
	ss.mu.Lock()
	id := ss.identityLocked()
	seen := make(map[accessKey]bool)
	for _, ts := range ss.types {
		for k := range ts.byKey {
			seen[accessKey{k.Stream.Authority, k.TypeURL}] = true
		}
	}
	lg := ss.loggerLocked()
	ss.mu.Unlock()
	if pol.ChecksNode() && len(seen) > 0 {
		if err := pol.CheckNode(&id); err != nil {
			return ss.srv.nodeDenied(lg, &id, err)
		}
	}
	for k := range seen {
		if !pol.Allowed(k.authority, k.typeURL, &id) {
			return ss.srv.denied(lg, k.authority, k.typeURL, "")
		}
	}
	return nil
}

// accessKey is one cached decision of a session.
type accessKey struct{ authority, typeURL string }

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
	return ss.cert.WithNode(ss.node.GetId(), ss.node.GetCluster())
}

// allowed reports whether the session may subscribe to typeURL names of
// authority, from its cache of decisions when the policy has not changed.
func (ss *session) allowed(authority, typeURL string) bool {
	pol := ss.srv.access.Load()
	if !pol.Restricted(authority, typeURL) {
		return true
	}
	k := accessKey{authority, typeURL}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.decidedBy != pol {
		ss.decisions = nil
		ss.decidedBy = pol
	}
	if ok, cached := ss.decisions[k]; cached {
		return ok
	}
	id := ss.identityLocked()
	ok := pol.Allowed(authority, typeURL, &id)
	if ss.decisions == nil {
		ss.decisions = make(map[accessKey]bool)
	}
	ss.decisions[k] = ok
	return ok
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

// checkFetch applies the node check and the access rules to one name of a
// unary Fetch or REST poll (id: its certificate and its request's node):
// a denied explicit name is PermissionDenied; skip reports a denied
// collection, left out of the answer.
func (s *Server) checkFetch(id *access.Identity, r Resolution, typeURL, name string) (skip bool, err error) {
	pol := s.access.Load()
	if !pol.Restricted(r.Key.Stream.Authority, typeURL) || pol.Allowed(r.Key.Stream.Authority, typeURL, id) {
		return false, nil
	}
	st := s.denied(s.lg, r.Key.Stream.Authority, typeURL, name)
	if r.Collection {
		return true, nil
	}
	return false, st
}
