package downstream

import (
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Applying a request, the part both variants share: accept (node, type,
// counts), resolve the names it asks for, record a NACK; the cache work it
// implies (change) is done after unlocking. sotw.go and delta.go hold each
// variant's rules.

// accept starts handling a request of either variant: it records the
// node, checks the type and counts the request; it returns the type URL.
func (ss *session) accept(node *corev3.Node, typeURL string) (string, error) {
	if err := ss.setNode(node); err != nil {
		return "", err
	}
	if err := ss.checkNode(); err != nil {
		return "", err
	}
	t, err := ss.checkType(typeURL)
	if err != nil {
		return "", err
	}
	ss.srv.m.requests.WithLabelValues(typeLabel(t)).Inc()
	if err := ss.checkTypeLimit(t); err != nil {
		return "", err
	}
	return t, nil
}

// checkType returns the type URL a request is for (a served or listed
// one as xdstype.Intern gives it: the session keeps it), or an
// InvalidArgument status when it is empty on ADS or not the stream's type.
func (ss *session) checkType(typeURL string) (string, error) {
	typeURL = xdstype.Intern(typeURL)
	if ss.fixedType == "" {
		if typeURL == "" {
			return "", status.Errorf(codes.InvalidArgument, "%v: an ADS request must set type_url", ErrMissingType)
		}
		if len(typeURL) > ss.srv.limits().MaxNameLength {
			return "", ss.srv.overLimit(limitNameLength, codes.InvalidArgument,
				"type_url of %d bytes (%s), over the limit of %d (downstream.limits.max_name_length)",
				len(typeURL), quoteShort(typeURL), ss.srv.limits().MaxNameLength)
		}
		return typeURL, nil
	}
	if typeURL == "" {
		return ss.fixedType, nil
	}
	if typeURL != ss.fixedType {
		return "", status.Errorf(codes.InvalidArgument, "%v: request for %s on the stream for %q", ErrWrongType, quoteShort(typeURL), ss.fixedType)
	}
	return typeURL, nil
}

// seenPool holds the sets checkDuplicates fills, for lists of at most
// pooledSeen names (an Envoy's request; longer ones get their own).
var seenPool = sync.Pool{New: func() any { return make(map[string]struct{}, pooledSeen) }}

const pooledSeen = 64

// checkDuplicates returns InvalidArgument when a list names one resource twice.
func checkDuplicates(field, typeURL string, names []string) error {
	if len(names) < 2 {
		return nil
	}
	var seen map[string]struct{}
	if len(names) <= pooledSeen {
		seen = seenPool.Get().(map[string]struct{})
		defer func() { clear(seen); seenPool.Put(seen) }()
	} else {
		seen = make(map[string]struct{}, len(names))
	}
	for _, n := range names {
		if _, ok := seen[n]; ok {
			return status.Errorf(codes.InvalidArgument, "%v: %s lists %s twice (type %s)", ErrDuplicateName, field, quoteShort(n), typeURL)
		}
		seen[n] = struct{}{}
	}
	return nil
}

// scratch is what applying a request (or ending a stream) needs only
// while it does: the names resolved, the keys to watch or unwatch. Pooled,
// so a burst of new streams does not allocate them per stream.
type scratch struct {
	resolved []resolved
	keys     []cache.Key
}

// maxScratch: a scratch grown past this many names (a request of many)
// is left to the garbage collector rather than kept in the pool.
const maxScratch = 1024

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns an empty scratch; release it when done.
func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release empties sc, dropping what it refers to, and pools it.
func (sc *scratch) release() {
	if cap(sc.resolved) > maxScratch || cap(sc.keys) > maxScratch {
		return
	}
	clear(sc.resolved)
	clear(sc.keys)
	sc.resolved, sc.keys = sc.resolved[:0], sc.keys[:0]
	scratchPool.Put(sc)
}

// change is the cache work a request implies, done after unlocking.
type change struct {
	watch   []cache.Key
	unwatch []cache.Key
	nodes   map[cache.LinkID]*corev3.Node // upstream nodes rules give, by stream
}

// add records a key to watch and the upstream node its rule gives, if any.
func (c *change) add(r Resolution) {
	c.watch = append(c.watch, r.Key)
	if r.Node != nil {
		if c.nodes == nil {
			c.nodes = make(map[cache.LinkID]*corev3.Node)
		}
		c.nodes[r.Key.Link] = r.Node
	}
}

func (c *change) apply(ss *session) {
	if len(c.unwatch) > 0 {
		ss.srv.cache.Unwatch(ss, c.unwatch...)
	}
	if len(c.watch) > 0 {
		watchKeys(ss.srv.cache, ss, c.watch, c.nodes)
	}
}

// watchKeys watches keys for w, presenting upstream, for a key's stream,
// the node its aggregation rule gives (nodes: the rule's, or one built
// from the group key alone); never the client's own Node, whose other fields are
// only its claim. xdstp streams present the relay's configured node.
func watchKeys(c Cache, w cache.Watcher, keys []cache.Key, nodes map[cache.LinkID]*corev3.Node) {
	if len(nodes) == 0 {
		c.Watch(w, nil, keys...)
		return
	}
	if node := onlyStream(keys, nodes); node != nil {
		c.Watch(w, node, keys...) // the common case: one group's names
		return
	}
	var own []cache.Key
	byStream := make(map[cache.LinkID][]cache.Key, len(nodes))
	for _, k := range keys {
		if _, ok := nodes[k.Link]; ok {
			byStream[k.Link] = append(byStream[k.Link], k)
		} else {
			own = append(own, k)
		}
	}
	if len(own) > 0 {
		c.Watch(w, nil, own...)
	}
	for s, ks := range byStream {
		c.Watch(w, nodes[s], ks...)
	}
}

// onlyStream returns the node of the one stream in nodes when every key is
// on it, else nil.
func onlyStream(keys []cache.Key, nodes map[cache.LinkID]*corev3.Node) *corev3.Node {
	if len(nodes) != 1 {
		return nil
	}
	for link, node := range nodes {
		for _, k := range keys {
			if k.Link != link {
				return nil
			}
		}
		return node
	}
	return nil
}

// resolved is one requested name with its key, or why it cannot be served.
type resolved struct {
	name string
	res  Resolution
	err  error
}

// resolveAll resolves names, appended to out; a malformed name or a legacy name no rule
// matches ends the stream with a status naming it; an unknown authority
// is returned for the caller to answer per variant.
func (ss *session) resolveAll(typeURL string, names []string, node *corev3.Node, out []resolved) ([]resolved, error) {
	out = slices.Grow(out, len(names))
	for _, n := range names {
		n, r, err := ss.srv.resolveName(typeURL, n, node)
		if err != nil {
			if st := ss.srv.statusFor(typeURL, n, node, err); st != nil {
				return nil, st
			}
			reason := reasonUnknownAuthority
			if isErr(err, ErrTypeNotCarried) {
				reason = reasonTypeNotCarried
			}
			ss.srv.m.requestErrors.WithLabelValues(typeLabel(typeURL), reason).Inc()
			ss.logger().Warn("requested name cannot be served here: its authority has no configuration, or does not carry its type",
				zap.String("type_url", clientText(typeURL)), zap.String("name", clientText(n)), zap.Error(err))
		}
		if err == nil && !ss.allowed(r.Key.Link.Authority, typeURL) {
			st := ss.srv.denied(ss.logger(), r.Key.Link.Authority, typeURL, n)
			if !r.Collection {
				return nil, st
			}
			if n == cache.Wildcard {
				continue // left out: the client learns nothing
			}
			err = ErrAccessDenied // answered as if it did not exist
		}
		out = append(out, resolved{name: n, res: r, err: err})
		if err == nil && r.Key.Link.Group != "" {
			ss.mu.Lock()
			if _, ok := ss.groups[r.Key.Link.Group]; !ok && len(ss.groups) < maxGroupsKept {
				if ss.groups == nil {
					ss.groups = make(map[string]struct{})
				}
				ss.groups[r.Key.Link.Group] = struct{}{}
				ss.lg = nil // rebuilt with the group on next use
			}
			ss.mu.Unlock()
		}
	}
	return out, nil
}

// statusFor maps a resolve error to the status that ends the stream, or
// nil when the name is answered instead (unknown authority).
func (s *Server) statusFor(typeURL, name string, node *corev3.Node, err error) error {
	switch {
	case isErr(err, ErrUnknownAuthority):
		return nil
	case isErr(err, ErrMalformedName):
		s.m.requestErrors.WithLabelValues(typeLabel(typeURL), reasonMalformedName).Inc()
		return status.Errorf(codes.InvalidArgument, "type %s: %v", typeURL, err)
	case isErr(err, ErrNoRule), isErr(err, aggregation.ErrRefused):
		// A rule's refuse result is counted with the requests no rule serves.
		s.m.requestErrors.WithLabelValues(typeLabel(typeURL), reasonNoRule).Inc()
		return status.Errorf(codes.FailedPrecondition, "type %s, name %s, node id %s cluster %s: %v",
			typeURL, quoteShort(name), quoteShort(node.GetId()), quoteShort(node.GetCluster()), err)
	default:
		s.m.requestErrors.WithLabelValues(typeLabel(typeURL), reasonResolve).Inc()
		return status.Errorf(codes.Unavailable, "type %s, name %s: %v", typeURL, quoteShort(name), err)
	}
}

// recordNackLocked records, counts and logs a NACK (a reply with
// error_detail) of ts's response nonce, for either variant (versionInfo is
// SotW's); it reports whether the reply was one. One client's NACK is that
// client's: it changes nothing that it or any other client is sent, until
// enough clients NACK one version that the NACK breaker holds it
// (rollout.go, package delivery).
func (ss *session) recordNackLocked(ts *typeState, nonce, versionInfo string, detail *rpcstatus.Status) bool {
	if detail == nil {
		return false
	}
	if ts.nacks == nil {
		ts.nacks = new(typeNacks)
	}
	ts.nacks.count++
	ts.nacks.last = clientText(detail.GetMessage())
	ss.srv.m.nacks.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	fields := []zap.Field{zap.String("type_url", clientText(ts.typeURL)), zap.String("nonce", clientText(nonce))}
	if ss.variant == xdstype.SotW {
		fields = append(fields, zap.String("version_info", clientText(versionInfo)))
	}
	ss.loggerLocked().Warn("client rejected a response", append(fields, zap.String("error_detail", ts.nacks.last))...)
	ss.srv.nacks.add(NackInfo{Time: time.Now(), NodeID: clientText(ss.node.GetId()), Cluster: clientText(ss.node.GetCluster()),
		Variant: string(ss.variant), TypeURL: clientText(ts.typeURL), Nonce: clientText(nonce), VersionInfo: clientText(versionInfo),
		ErrorCode: detail.GetCode(), ErrorDetail: ts.nacks.last})
	return true
}

// subscribing is what a checked request changes of one type's
// subscription, in the terms both variants share (subscribeRequested).
type subscribing struct {
	ts      *typeState
	typeURL string
	node    *corev3.Node
	add     []string // names to resolve and subscribe
	first   bool     // the type's first request on this stream
	// dropLocked gives up what the request leaves (the variant's rule),
	// under the lock; it reports whether that alone calls for evaluating
	// every subscription of the type.
	dropLocked func(ch *change) bool
	// renewUnknown: a name that cannot be served, asked again, is answered
	// again (delta); over SotW a repeat of the list keeps its place.
	renewUnknown bool
	// declares: the variant lets a client declare the versions it holds
	// in the type's first request (delta's initial_resource_versions).
	declares bool
}

// subscribeRequested is the tail of applying a request, written once for
// both variants. It resolves the names the request adds before changing
// anything: a request that fails (a malformed name ends the stream) leaves
// the session as it was, and the stream's teardown releases all it holds.
// Then, under one lock, it drops what the request leaves, subscribes each
// name resolved and owes it a response, gathers those (answered together,
// gather.go), and does the cache work after unlocking (the writer waits
// until the loop's endRequest).
func (ss *session) subscribeRequested(sb subscribing) error {
	sc := getScratch()
	defer sc.release()
	rs, err := ss.resolveAll(sb.typeURL, sb.add, sb.node, sc.resolved)
	sc.resolved = rs
	if err != nil {
		return err
	}
	if err := ss.admitResolved(rs); err != nil {
		return err // the upstream links they need (groups.go)
	}

	ch := change{watch: slices.Grow(sc.keys, len(rs))}
	defer func() { sc.keys = ch.watch }()
	ts := sb.ts
	ss.mu.Lock()
	ts.reserveLocked(len(rs))
	dropped := sb.dropLocked(&ch)
	owed := make([]string, 0, len(rs))
	for _, r := range rs {
		if r.err != nil {
			ts.noteUnknownLocked(r, sb.renewUnknown)
			continue
		}
		delete(ts.unknown, r.name) // served now (a reload added its authority)
		ts.subscribeLocked(r, &ch)
		if ts.owedLocked(r.name, sb.first && sb.declares) {
			ts.forceLocked(r.name)
			owed = append(owed, r.name)
		}
	}
	ss.gatherLocked(ts, owed) // answered together (gather.go)
	if len(rs) > 0 || sb.first || dropped {
		ts.evalAll = true
	}
	ss.mu.Unlock()

	ch.apply(ss) // the writer waits until the loop's endRequest
	return nil
}

// noteUnknownLocked records a requested name that cannot be served (logged
// and counted by resolveAll): it is answered once with a NOT_FOUND resource
// error. With renew, a name already noted is answered again; without, it
// keeps its place.
func (ts *typeState) noteUnknownLocked(r resolved, renew bool) {
	if _, ok := ts.unknown[r.name]; ok && !renew {
		return
	}
	if ts.unknown == nil {
		ts.unknown = make(map[string]unknownName)
	}
	ts.unknown[r.name] = unknownName{detail: unknownStatus(r.err)}
}

// owedLocked reports whether a name a request subscribes must be sent. The
// server must send (SotW: resend) every name newly requested, unless the
// client just told us its version (reconnect: declared, the type's first
// request over delta, which lists the name in initial_resource_versions).
func (ts *typeState) owedLocked(name string, declared bool) bool {
	h, ok := ts.sent.get(name)
	return !(declared && ok && h.res == nil && !h.absent)
}
