package downstream

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// session is one client stream. The handler goroutine receives and
// handles requests and changes subscriptions (stream.go); one writer
// goroutine (writer.go) is the only caller of send. The cache calls
// Notify, which only marks a key dirty, then Flush, which wakes the
// writer. The writer runs only while there is work (writerState): an idle
// stream costs one goroutine, its handler waiting in Recv.
type session struct {
	srv       *Server
	id        uint64                       // read-only after newSession
	variant   xdstype.Variant              // read-only after newSession
	fixedType string                       // read-only; "" for ADS
	send      func(*encodedResponse) error // read-only; called by the writer only
	// stream ends the gRPC stream with a status (streamend.go; fail):
	// read-only, set before the handler runs.
	stream statusWriter
	// failed is the status fail ended the stream with (the first); nil
	// while none.
	failed atomic.Pointer[status.Status]
	peer   string // read-only after newSession
	// cert is the SANs of the client's verified certificate (access.go);
	// nil when it has none.
	cert *access.Identity // read-only after newSession

	mu   sync.Mutex
	node *corev3.Node // guarded by mu; from the first request
	// viewer is the node as a rollout's hold tells clients apart
	// (rollout.go): set with node, under mu, before the Server indexes
	// the session (under its mu); read-only after.
	viewer cache.Viewer
	// nacks: client NACKs for the NACK breaker, reported by the handler
	// once it unlocks (rollout.go). guarded by mu
	nacks []cache.Nack
	// ttl: the node advertised TTL support; wrap: what it takes in the
	// SotW Resource wrapper (features.go). Guarded by mu, copied into
	// each typeState.
	ttl  bool
	wrap sotwWrap
	// noted, parked: below, with awaiting and ending (here, where they
	// take no room of their own). Guarded by mu.
	noted  bool
	parked bool
	// lg is the logger carrying the session's log context (variant, peer,
	// node id and cluster, groups), built on first use from the session's
	// fields (most sessions never log: a logger, or its fields, per
	// session would cost each). Guarded by mu; nil again when the context
	// changes.
	lg *zap.Logger
	// dirty: keys changed since the writer last looked (a small one is
	// emptied and kept, writer.go resetDirtyLocked).
	dirty  table[cache.Key, struct{}] // guarded by mu
	types  byName[*typeState]         // guarded by mu; by type URL
	groups map[string]struct{}        // guarded by mu; aggregation group keys of legacy names (the first maxGroupsKept; nil until one)
	nonce  uint64                     // guarded by mu; last nonce issued on this stream
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
	// decisions caches access decisions made under the policy decidedBy;
	// nodeCheckedBy is the policy the node was last checked under
	// (access.go). Guarded by mu.
	decisions     map[accessKey]bool
	decidedBy     *access.Policy
	nodeCheckedBy *access.Policy
	// stopped: the stream is ending (SetAccess ended it: recheck sets it
	// under mu; or the handler is returning: stopWriter); its writer
	// starts no Send any more. Atomic: read before every Send without the
	// lock.
	stopped atomic.Bool
	// watch is the send watch (park.go) and sending the round whose
	// responses the writer sends (nil between rounds), both owned by the
	// (single) writer; the watch's timer reads sending once it parked the
	// session.
	watch   *sendWatch
	sending *round
	// parked (above): a Send waited send_timeout and has not returned
	// (park.go); ending: the status the handler ends the stream with,
	// once its loop returned (stopWriter). Guarded by mu.
	ending *status.Status
	// budget is the stream's request budget (budget.go), owned by the
	// handler goroutine; responsesSent counts the responses the writer
	// sent (each earns one free answer).
	budget        requestBudget
	responsesSent atomic.Uint64
	// newGroups: the upstream links this stream caused to open
	// (groups.go). Owned by the handler goroutine.
	newGroups int
	// indexed: the node id the Server lists this stream under (byNode;
	// "" while not listed); sameNode: the next stream listed under it.
	// Guarded by the Server's mu.
	indexed  string
	sameNode *session
}

func newSession(srv *Server, variant xdstype.Variant, fixedType, peer string, cert access.Identity, send func(*encodedResponse) error) *session {
	ss := &session{
		srv:       srv,
		id:        srv.nextID.Add(1),
		variant:   variant,
		fixedType: fixedType,
		send:      send,
		peer:      peer,
	}
	if len(cert.URISANs) > 0 || len(cert.DNSSANs) > 0 || cert.NodeID != "" || cert.NodeCluster != "" {
		ss.cert = &cert
	}
	return ss
}

// Notify implements cache.Watcher: mark k dirty. The writer is not woken
// (and, if running, does not collect) until the change's Flush, so what one
// origin change brings goes out in one response.
func (ss *session) Notify(k cache.Key) {
	ss.mu.Lock()
	if !ss.evaluatedLocked(k) {
		ss.dirty.set(k, struct{}{})
	}
	if ss.awaiting != nil {
		ss.noteAwaitedLocked(k) // gather.go
	}
	ss.writer.announceLocked()
	ss.mu.Unlock()
}

// evaluatedLocked reports whether the writer's next round looks up every
// subscription of k's type anyway (evalAll: a request changed them), so k
// need not be marked dirty: the Watch of a new stream's names notifies
// each one it finds cached, and that round covers them all. Only a request
// sets evalAll, and its end wakes the writer, so the round is sure to
// come; checked only while a request is applied, so a fan-out's Notify
// pays nothing for it.
func (ss *session) evaluatedLocked(k cache.Key) bool {
	if !ss.writer.requestLocked() {
		return false
	}
	ts, _ := ss.types.get(k.TypeURL)
	return ts != nil && ts.evalAll
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
	// A parked session takes none: its response would wait on the client.
	take := cs != nil && ss.lastSet != cs.Seq() && len(ss.sets) < maxPendingSets && !ss.parked
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
	if ss.dirty.len() > 0 || len(ss.sets) > 0 {
		return true
	}
	for _, ts := range ss.types.all() {
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

// logger returns the session's logger.
func (ss *session) logger() *zap.Logger {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.loggerLocked()
}

// loggerLocked returns the session's logger, building it on first use.
func (ss *session) loggerLocked() *zap.Logger {
	if ss.lg == nil {
		fs := make([]zap.Field, 0, 4+len(ss.groups))
		fs = append(fs, zap.String("variant", string(ss.variant)), zap.String("peer", ss.peer))
		if ss.node != nil {
			fs = append(fs, zap.String("node_id", clientText(ss.node.GetId())), zap.String("node_cluster", clientText(ss.node.GetCluster())))
		}
		for _, g := range slices.Sorted(maps.Keys(ss.groups)) {
			fs = append(fs, zap.String("group", g))
		}
		ss.lg = ss.srv.lg.With(fs...)
	}
	return ss.lg
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
	if ss.node != nil {
		ss.mu.Unlock()
		return nil
	}
	ss.node = kept
	ss.viewer = cache.ViewerOf(kept.GetId(), kept.GetCluster())
	ss.ttl, ss.wrap = supportsTTL(n), sotwWrapOf(n) // client features are read here, not kept
	for _, ts := range ss.types.all() {
		ts.ttl, ts.wrap = ss.ttl, typeWrap(ss.wrap, ts.typeURL)
	}
	ss.forgetDecisionsLocked()
	ss.lg = nil // rebuilt with the node on next use
	ss.mu.Unlock()
	ss.srv.indexNode(ss, kept.GetId()) // found by node id from now on (ClientProgress)
	return nil
}

func (ss *session) nodeLocked() *corev3.Node { return ss.node }

// typeOf returns the state of typeURL, nil when the stream has none.
func (ss *session) typeOf(typeURL string) *typeState {
	ts, _ := ss.types.get(typeURL)
	return ts
}

// typeLocked returns the state of typeURL, creating it.
func (ss *session) typeLocked(typeURL string) *typeState {
	ts, ok := ss.types.get(typeURL)
	if !ok {
		ts = newTypeState(typeURL)
		ts.ttl, ts.wrap = ss.ttl, typeWrap(ss.wrap, typeURL)
		ss.types.set(typeURL, ts)
		ss.srv.counts.typ(ss.variant, ts.label, 1)
	}
	return ts
}

// nextNonceLocked returns a nonce unique on this stream.
func (ss *session) nextNonceLocked() string {
	ss.nonce++
	return strconv.FormatUint(ss.nonce, 10)
}

// keysLocked appends every key the session watches to keys, grown once
// (at most one key per name).
func (ss *session) keysLocked(keys []cache.Key) []cache.Key {
	n := 0
	for _, ts := range ss.types.all() {
		n += ts.subs.len()
	}
	keys = slices.Grow(keys, n)
	for _, ts := range ss.types.all() {
		ts.eachKeyLocked(func(k cache.Key) { keys = append(keys, k) })
	}
	return keys
}
