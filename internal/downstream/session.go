package downstream

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// session is one client stream. The handler goroutine handles requests and
// changes subscriptions; one writer goroutine (writer.go) is the only caller
// of send. The cache calls Notify, which only marks a key dirty, then
// Flush, which wakes the writer. The writer runs only while there is work
// (writerState): an idle stream costs no writer goroutine.
type session struct {
	srv       *Server
	id        uint64            // read-only after newSession
	variant   xdstype.Variant   // read-only after newSession
	fixedType string            // read-only; "" for ADS
	send      func(m any) error // read-only; called by the writer only
	done      chan struct{}     // closed when the handler returns
	failed    chan error        // 1 slot: the writer's reason to end the stream
	peer      string            // read-only after newSession
	// cert is the SANs of the client's verified certificate (access.go).
	cert access.Identity // read-only after newSession

	mu   sync.Mutex
	node *corev3.Node // guarded by mu; from the first request
	// ttl: the node advertised TTL support; wrap: what it takes in the
	// SotW Resource wrapper (features.go). Guarded by mu, copied into
	// each typeState.
	ttl  bool
	wrap sotwWrap
	// logFields are the session's log context (variant, peer, node id and
	// cluster, groups); lg is the logger carrying them, built on first use
	// (most sessions never log: a logger per session would cost a buffer
	// each). Both guarded by mu.
	logFields []zap.Field
	lg        *zap.Logger
	dirty     map[cache.Key]struct{} // guarded by mu; keys changed since the writer last looked
	spare     map[cache.Key]struct{} // guarded by mu; the emptied previous dirty set, reused
	types     map[string]*typeState  // guarded by mu; by type URL
	groups    map[string]struct{}    // guarded by mu; aggregation group keys of legacy names (the first maxGroupsKept)
	nonce     uint64                 // guarded by mu; last nonce issued on this stream
	// writer is the writer goroutine's lifecycle (writerstate.go).
	writer writerState // guarded by mu
	// sets are the origin changes noted since the writer last collected;
	// lastSet: the Seq of the latest taken (Flush repeats for one change
	// take it once); a number, not the set, so an idle session does not
	// keep an old change's resources and encodings alive.
	sets    []*cache.ChangeSet // guarded by mu
	lastSet uint64             // guarded by mu
	// awaiting: the keys of names the writer held back in its last round
	// that were still pending (gather.go); noted: a key outside it was
	// notified since. A Flush that brings only some of them wakes no
	// writer. Guarded by mu.
	awaiting map[cache.Key]struct{}
	noted    bool
	// decisions caches access decisions made under the policy decidedBy;
	// nodeCheckedBy is the policy the node was last checked under
	// (access.go). Guarded by mu.
	decisions     map[accessKey]bool
	decidedBy     *access.Policy
	nodeCheckedBy *access.Policy
	// revoked: SetAccess ended the stream (recheck, which sets it under
	// mu); its writer starts no Send any more. Atomic: read before every
	// Send without the lock.
	revoked atomic.Bool
	// sendTimer is the send watchdog, owned by the (single) writer.
	sendTimer *time.Timer
}

func newSession(srv *Server, variant xdstype.Variant, fixedType, peer string, cert access.Identity, send func(any) error) *session {
	return &session{
		srv:       srv,
		id:        srv.nextID.Add(1),
		variant:   variant,
		fixedType: fixedType,
		send:      send,
		done:      make(chan struct{}),
		failed:    make(chan error, 1),
		peer:      peer,
		cert:      cert,
		// Room for node id, cluster and one group: one allocation.
		logFields: append(make([]zap.Field, 0, 5), zap.String("variant", string(variant)), zap.String("peer", peer)),
		dirty:     make(map[cache.Key]struct{}),
		types:     make(map[string]*typeState),
		groups:    make(map[string]struct{}),
	}
}

// Notify implements cache.Watcher: mark k dirty. The writer is not woken
// (and, if running, does not collect) until the change's Flush, so what one
// origin change brings goes out in one response.
func (ss *session) Notify(k cache.Key) {
	ss.mu.Lock()
	ss.dirty[k] = struct{}{}
	if ss.awaiting != nil {
		ss.noteAwaitedLocked(k) // gather.go
	}
	ss.writer.announceLocked()
	ss.mu.Unlock()
}

// maxPendingSets bounds the origin changes a session waits to send before
// they count as sent by it (for xds_relay_fanout_duration_seconds only): a
// client that does not drain its stream stops holding up the measurement.
const maxPendingSets = 16

// Flush implements cache.Watcher: the change being announced is complete;
// wake the writer. Repeats for one change find nothing new and return.
func (ss *session) Flush(cs *cache.ChangeSet) {
	ss.mu.Lock()
	if ss.writer.closedLocked() {
		ss.mu.Unlock()
		return
	}
	take := cs != nil && ss.lastSet != cs.Seq() && len(ss.sets) < maxPendingSets
	if announced := ss.writer.flushLocked(); !announced && !take {
		ss.mu.Unlock()
		return
	}
	if take {
		ss.lastSet = cs.Seq()
		cs.Take()
		ss.sets = append(ss.sets, cs)
	}
	if ss.awaiting != nil && ss.quietLocked() {
		ss.mu.Unlock()
		return // only part of what is gathered: nothing to send yet
	}
	start := ss.wakeLocked()
	ss.mu.Unlock()
	if start != nil {
		ss.startWriter(start)
	}
}

// beginRequest holds the writer back while a request is applied.
func (ss *session) beginRequest() {
	ss.mu.Lock()
	ss.writer.holdLocked()
	ss.mu.Unlock()
}

// endRequest lets the writer go again and, when wake is set, wakes it once
// for everything the request and the cache's notifications left dirty.
func (ss *session) endRequest(wake bool) {
	ss.mu.Lock()
	ss.writer.releaseLocked()
	var start chan struct{}
	if wake && ss.hasWorkLocked() {
		start = ss.wakeLocked()
	}
	ss.mu.Unlock()
	if start != nil {
		ss.startWriter(start)
	}
}

// hasWorkLocked reports whether the writer has anything to look at: an
// ACK that changed no subscription while nothing changed leaves none, and
// starts no writer.
func (ss *session) hasWorkLocked() bool {
	if len(ss.dirty) > 0 || len(ss.sets) > 0 {
		return true
	}
	for _, ts := range ss.types {
		if ts.evalAll || len(ts.force) > 0 || hasUnreported(ts) {
			return true
		}
	}
	return false
}

// wakeLocked notes work for the writer; it returns a channel when a writer
// must be started (by startWriter, after unlocking), nil otherwise.
func (ss *session) wakeLocked() chan struct{} {
	end := ss.writer.wakeLocked()
	if end != nil {
		ss.srv.wg.Add(1) // done by startWriter's goroutine
	}
	return end
}

// startWriter runs the writer until it runs out of work; the Server's wait
// group owns it, and the handler waits for it on the way out.
func (ss *session) startWriter(end chan struct{}) {
	go func() {
		defer ss.srv.wg.Done()
		defer close(end)
		ss.writeLoop()
	}()
}

// fail records why the stream must end (first reason wins) for the handler.
func (ss *session) fail(err error) {
	select {
	case ss.failed <- err:
	default:
	}
}

// logger returns the session's logger.
func (ss *session) logger() *zap.Logger {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.loggerLocked()
}

// loggerLocked returns the session's logger, building it on first use.
func (ss *session) loggerLocked() *zap.Logger {
	if ss.lg == nil {
		ss.lg = ss.srv.lg.With(ss.logFields...)
	}
	return ss.lg
}

// addLogFieldsLocked adds context to the session's log lines.
func (ss *session) addLogFieldsLocked(fs ...zap.Field) {
	ss.logFields = append(ss.logFields, fs...)
	ss.lg = nil // rebuilt with them on next use
}

// setNode records the node of the first request that carries one: only
// the part of it the relay reads (keepNode), each string bounded.
func (ss *session) setNode(n *corev3.Node) error {
	if n == nil {
		return nil
	}
	ss.mu.Lock()
	known := ss.node != nil
	ss.mu.Unlock()
	if known {
		return nil
	}
	kept, err := ss.srv.keepNode(n)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.node != nil {
		return nil
	}
	ss.node = kept
	ss.ttl, ss.wrap = supportsTTL(n), sotwWrapOf(n) // client features are read here, not kept
	for _, ts := range ss.types {
		ts.ttl, ts.wrap = ss.ttl, ss.wrap
	}
	ss.forgetDecisionsLocked()
	ss.addLogFieldsLocked(zap.String("node_id", clientText(n.GetId())), zap.String("node_cluster", clientText(n.GetCluster())))
	return nil
}

func (ss *session) nodeLocked() *corev3.Node { return ss.node }

// typeLocked returns the state of typeURL, creating it.
func (ss *session) typeLocked(typeURL string) *typeState {
	ts, ok := ss.types[typeURL]
	if !ok {
		ts = newTypeState(typeURL)
		ts.ttl, ts.wrap = ss.ttl, ss.wrap
		ss.types[typeURL] = ts
		ss.srv.counts.typ(ss.variant, ts.label, 1)
	}
	return ts
}

// nextNonceLocked returns a nonce unique on this stream.
func (ss *session) nextNonceLocked() string {
	ss.nonce++
	return strconv.FormatUint(ss.nonce, 10)
}

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

// checkType returns the type URL a request is for, or an InvalidArgument
// status when it is empty on ADS or not the stream's type.
func (ss *session) checkType(typeURL string) (string, error) {
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

// checkDuplicates returns InvalidArgument when a list names one resource twice.
func checkDuplicates(field, typeURL string, names []string) error {
	if len(names) < 2 {
		return nil
	}
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		if _, ok := seen[n]; ok {
			return status.Errorf(codes.InvalidArgument, "%v: %s lists %s twice (type %s)", ErrDuplicateName, field, quoteShort(n), typeURL)
		}
		seen[n] = struct{}{}
	}
	return nil
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

// resolved is one requested name with its key, or why it cannot be served.
type resolved struct {
	name string
	res  Resolution
	err  error
}

// resolveAll resolves names; a malformed name or a legacy name no rule
// matches ends the stream with a status naming it; an unknown authority
// is returned for the caller to answer per variant.
func (ss *session) resolveAll(typeURL string, names []string, node *corev3.Node) ([]resolved, error) {
	out := make([]resolved, 0, len(names))
	for _, n := range names {
		n = ss.srv.intern(n)
		r, err := ss.srv.resolve(typeURL, n, node)
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
				ss.groups[r.Key.Link.Group] = struct{}{}
				ss.addLogFieldsLocked(zap.String("group", r.Key.Link.Group))
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
// client's: it changes nothing that it or any other client is sent.
func (ss *session) recordNackLocked(ts *typeState, nonce, versionInfo string, detail *rpcstatus.Status) bool {
	if detail == nil {
		return false
	}
	ts.nackCount++
	ts.lastNack = clientText(detail.GetMessage())
	ss.srv.m.nacks.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	fields := []zap.Field{zap.String("type_url", clientText(ts.typeURL)), zap.String("nonce", clientText(nonce))}
	if ss.variant == xdstype.SotW {
		fields = append(fields, zap.String("version_info", clientText(versionInfo)))
	}
	ss.loggerLocked().Warn("client rejected a response", append(fields, zap.String("error_detail", ts.lastNack))...)
	ss.srv.nacks.add(NackInfo{Time: time.Now(), NodeID: clientText(ss.node.GetId()), Cluster: clientText(ss.node.GetCluster()),
		Variant: string(ss.variant), TypeURL: clientText(ts.typeURL), Nonce: clientText(nonce), VersionInfo: clientText(versionInfo),
		ErrorCode: detail.GetCode(), ErrorDetail: ts.lastNack})
	return true
}

// keysLocked returns every key the session watches.
func (ss *session) keysLocked() []cache.Key {
	var keys []cache.Key
	for _, ts := range ss.types {
		for k := range ts.byKey {
			keys = append(keys, k)
		}
	}
	return keys
}

// run is the handler body shared by every streaming method: it starts the
// request pump and the writer, handles requests in this goroutine, and
// returns the stream's status.
func (ss *session) run(ctx context.Context, recv <-chan request, handle func(request) error) error {
	srv := ss.srv
	srv.addSession(ss)
	srv.m.streams.WithLabelValues(string(ss.variant)).Inc()
	srv.counts.stream(ss.variant, 1)

	slow, err := ss.loop(ctx, recv, handle)

	ss.mu.Lock()
	writerEnd := ss.writer.closeLocked()
	sets := ss.sets
	ss.sets = nil
	ss.endGathersLocked()
	ss.mu.Unlock()
	for _, cs := range sets {
		cs.Done() // no response will carry them any more
	}
	close(ss.done)
	if writerEnd != nil && !slow {
		// The writer is not stuck in Send (or ctx releases it): wait for
		// it so nothing is sent after the handler returns. A Send stuck on
		// a client that does not read is only released once the handler
		// has returned; then the Server's wait group owns the writer.
		select {
		case <-writerEnd:
		case werr := <-ss.failed:
			if isErr(werr, ErrSlowClient) {
				err = ss.slowStatus()
			}
		}
	}
	ss.mu.Lock()
	keys := ss.keysLocked()
	ss.mu.Unlock()
	if len(keys) > 0 {
		srv.cache.Unwatch(ss, keys...)
	}
	srv.removeSession(ss)
	srv.m.streams.WithLabelValues(string(ss.variant)).Dec()
	srv.counts.stream(ss.variant, -1)
	ss.countTypesDone()
	return err
}

func (ss *session) slowStatus() error {
	ss.srv.m.slowDisconnects.Inc()
	if ss.srv.slowHook != nil {
		ss.srv.slowHook()
	}
	ss.logger().Warn("client too slow, disconnecting", zap.Duration("send_timeout", ss.srv.sendTimeout()))
	return status.Errorf(codes.ResourceExhausted, "%v (%v)", ErrSlowClient, ss.srv.sendTimeout())
}

// loop handles requests until the stream must end; slow reports that the
// writer is stuck in Send on a client that does not drain its stream.
func (ss *session) loop(ctx context.Context, recv <-chan request, handle func(request) error) (slow bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return false, status.FromContextError(ctx.Err()).Err()
		case err := <-ss.failed:
			if isErr(err, ErrSlowClient) {
				return true, ss.slowStatus()
			}
			return false, err
		case r := <-recv:
			if r.err != nil {
				if isEOF(r.err) {
					return false, nil
				}
				return false, r.err
			}
			pol := ss.srv.access.Load()
			ss.beginRequest()
			err := handle(r)
			if now := ss.srv.access.Load(); err == nil && now != pol {
				// SetAccess swapped the policy while this request was
				// applied: its recheck may have run before what this
				// request subscribed was in place. Checked before the
				// writer is let go, so nothing of it is sent first.
				err = ss.recheck(now)
			}
			ss.endRequest(err == nil)
			if err != nil {
				ss.logger().Info("ending client stream", zap.Error(err))
				return false, err
			}
		}
	}
}

// request is one message from the client, or the error that ended Recv.
type request struct {
	msg any // *discoveryv3.DiscoveryRequest or *discoveryv3.DeltaDiscoveryRequest
	err error
}

// pump reads the stream until it fails; owned by the Server's wait group,
// it ends when Recv fails (the stream ended) or the handler returned.
func pump[T any](ss *session, recvFn func() (T, error), out chan<- request) {
	ss.srv.wg.Add(1)
	go func() {
		defer ss.srv.wg.Done()
		for {
			m, err := recvFn()
			r := request{msg: m, err: err}
			select {
			case out <- r:
			case <-ss.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
}
