package downstream

import (
	"slices"
	"strings"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// probe is one subscription the writer looks up in the cache.
type probe struct {
	name       string // as the client asked
	key        cache.Key
	collection bool
	// member: key is one member of collection name (looked up with Get),
	// not the collection itself.
	member bool
	// Filled without the session lock.
	res     *cache.Resource
	members []*cache.Resource
	state   cache.State
	err     *statuspb.Status // the key's resource error (cache.Lookup)
	// memberErrs: errors of members (collections listed in full).
	memberErrs map[*cache.Resource]*statuspb.Status
	// ro: where res stands in its rollout; rollouts: the members', those
	// held back or deferred only (rollout.go).
	ro       cache.Rollout
	rollouts map[*cache.Resource]cache.Rollout
}

// work is what the writer evaluates for one type on one wake-up.
type work struct {
	ts     *typeState
	probes []probe
	seen   map[probeID]struct{} // probes already added, once there are many
	many   bool                 // seen is in use (more than manyProbes)
	// all: every subscription of ts is in probes, each once (the
	// subscription set changed): nothing further is added, collections
	// are listed whole, so no probe is checked against the others.
	all  bool
	diff diff // what the probes change (diff.go)
	// order and spare are sortProbes' scratch, kept with the pooled work.
	order []int32
	spare []probe
}

// reset empties w for reuse, dropping its references to resources.
func (w *work) reset() {
	w.ts = nil
	w.all = false
	clear(w.probes)
	w.probes = w.probes[:0]
	w.diff.reset()
	if w.many {
		clear(w.seen)
		w.many = false
	}
}

// round is what one wake-up of a writer evaluates: per type, the probes.
// Rounds come from roundPool and go back once the responses are built,
// so a wake-up allocates no maps or slices in the steady state, and an
// idle session keeps none.
type round struct {
	works []*work // works[:n] are in use
	n     int
	// sets are the origin changes this round's responses carry.
	sets []*cache.ChangeSet
}

var roundPool = sync.Pool{New: func() any { return new(round) }}

// get returns the work of ts in r, taking a fresh one when there is none.
func (r *round) get(ts *typeState) *work {
	for _, w := range r.works[:r.n] {
		if w.ts == ts {
			return w
		}
	}
	if r.n == len(r.works) {
		r.works = append(r.works, new(work))
	}
	w := r.works[r.n]
	r.n++
	w.ts = ts
	return w
}

// active returns the works in use.
func (r *round) active() []*work { return r.works[:r.n] }

// release marks r's origin changes done (their responses are sent, or
// never will be), empties r and returns it to the pool.
func (r *round) release() {
	for _, cs := range r.sets {
		cs.Done()
	}
	clear(r.sets)
	r.sets = r.sets[:0]
	for _, w := range r.works[:r.n] {
		w.reset()
	}
	r.n = 0
	roundPool.Put(r)
}

// probeID identifies a probe: a subscription, or one member of it.
type probeID struct {
	name   string
	member string // member key name; "" for the subscription itself
}

// manyProbes is where work switches from a linear scan to a set.
const manyProbes = 8

// addProbe appends p unless it is already there.
func (w *work) addProbe(p probe) {
	if w.all {
		return // there, or (a member) in its collection's probe
	}
	id := probeID{name: p.name}
	if p.member {
		id.member = p.key.Name
	}
	if w.many {
		if _, ok := w.seen[id]; ok {
			return
		}
		w.seen[id] = struct{}{}
	} else {
		for i := range w.probes {
			q := &w.probes[i]
			if q.name == p.name && q.member == p.member && (!p.member || q.key.Name == p.key.Name) {
				return
			}
		}
		if len(w.probes) == manyProbes {
			if w.seen == nil {
				w.seen = make(map[probeID]struct{}, 2*manyProbes)
			}
			w.many = true
			for i := range w.probes {
				q := &w.probes[i]
				qid := probeID{name: q.name}
				if q.member {
					qid.member = q.key.Name
				}
				w.seen[qid] = struct{}{}
			}
			w.seen[id] = struct{}{}
		}
	}
	w.probes = append(w.probes, p)
}

// add adds the probe of name, subscribed as s.
func (w *work) add(name string, s sub) {
	w.addProbe(probe{name: name, key: w.ts.keyOf(name, s), collection: s.collection})
}

func (w *work) addCollections(ts *typeState) {
	for n, c := range ts.colls {
		w.addProbe(probe{name: n, key: c.key, collection: true})
	}
}

// addMember adds member key k of the collections of ts that contain it.
func (w *work) addMember(ts *typeState, k cache.Key) {
	for n, c := range ts.colls {
		if c.key.Link != k.Link || !c.contains(k) {
			continue
		}
		w.addProbe(probe{name: n, key: k, collection: true, member: true})
	}
}

// writeLoop is the writer: the only caller of send. It swaps out what
// changed, sends the newest state, and returns once nothing new arrived
// while it worked (the next wake-up starts a new writer).
func (ss *session) writeLoop() {
	for {
		msgs, rd := ss.build()
		ss.sending = rd // the send watch's, should it park the session (park.go)
		err := ss.sendAll(msgs)
		ss.sending = nil
		if rd != nil {
			rd.release()
		}
		if err != nil {
			if !isErr(err, errStreamDone) {
				ss.fail(err)
			}
			return
		}
		ss.mu.Lock()
		again := ss.writer.nextRoundLocked()
		ss.mu.Unlock()
		if !again {
			return
		}
	}
}

// sendAll sends one round's responses in order; errStreamDone once the
// stream is ending.
func (ss *session) sendAll(msgs []outMsg) error {
	for _, m := range msgs {
		if ss.srv.sendHook != nil {
			ss.srv.sendHook(m.typeURL)
		}
		// The last check before Send: the handler stops the session
		// before it waits for the writer, and SetAccess one it ends
		// before it returns, so no Send starts on it afterwards.
		if ss.stopped.Load() {
			return errStreamDone
		}
		if err := ss.sendWithTimeout(m.msg); err != nil {
			return err
		}
		ss.srv.m.responses.WithLabelValues(typeLabel(m.typeURL)).Inc()
		ss.srv.m.responseResource.WithLabelValues(typeLabel(m.typeURL)).Add(float64(m.count))
		ss.srv.m.countErrors(m.typeURL, m.errs)
	}
	return nil
}

// sendWithTimeout sends m under the send watch (park.go): a Send that
// has not returned within the send timeout parks the session, or ends the
// stream as too slow (downstream.slow_clients).
func (ss *session) sendWithTimeout(m *encodedResponse) error { return ss.watchedSend(m) }

// outMsg is one response ready to send.
type outMsg struct {
	msg     *encodedResponse
	typeURL string
	count   int                          // resources and removals in it
	errs    []*discoveryv3.ResourceError // its resource errors
}

// build turns what changed into responses. The cache is read without the
// session lock; the responses are built under it from the newest state.
// The caller releases the round once the responses are sent.
func (ss *session) build() ([]outMsg, *round) {
	ss.mu.Lock()
	if ss.writer.heldLocked() || ss.stopped.Load() {
		// A request is being applied, or a change announced: its
		// endRequest or Flush wakes the writer. Stopped: the stream is
		// ending.
		ss.mu.Unlock()
		return nil, nil
	}
	if m, rd, ok := ss.sharedLocked(); ok {
		ss.mu.Unlock()
		return []outMsg{m}, rd
	}
	rd := ss.collectLocked()
	ss.mu.Unlock()
	works := rd.active()
	if len(works) == 0 {
		return nil, rd
	}
	for _, w := range works {
		ss.lookup(w)
	}
	ss.mu.Lock()
	// Loaded under mu: a policy SetAccess put in place before its recheck
	// of this session is the one members are checked with here, and what
	// was sent under the one before is what that recheck sees held.
	pol := ss.srv.access.Load()
	for _, w := range works {
		ss.servedLocked(w) // rollout.go
		ss.checkMembersLocked(pol, w)
		ss.oneKeyLocked(w)          // onekey.go
		ss.gatherRoundLocked(rd, w) // gather.go
	}
	var lg *zap.Logger
	if ss.srv.lg.Core().Enabled(zap.DebugLevel) {
		lg = ss.loggerLocked()
	}
	out := ss.responsesLocked(works)
	for _, w := range works {
		w.ts.releaseLocked()
	}
	ss.mu.Unlock()
	logResponses(lg, out)
	return out, rd
}

// lookup fills w's probes from the cache, without the session lock,
// withholds what the session is owed afresh (donotcache.go), and sorts the
// probes by name.
func (ss *session) lookup(w *work) {
	for i := range w.probes {
		p := &w.probes[i]
		if p.collection && !p.member {
			l := ss.srv.cache.LookupMembers(p.key)
			p.members, p.state, p.err, p.memberErrs, p.rollouts = l.Members, l.State, l.Err, l.MemberErrs, l.Rollouts
		} else {
			p.res, p.state, p.err, p.ro = ss.srv.cache.LookupRollout(p.key)
		}
	}
	ss.withholdOwed(w)
	w.sortProbes()
}

// sortProbes orders w's probes by name, the order a response lists them
// in. A probe is large (about 150 bytes): the sort moves their indexes,
// and each probe moves once, into the work's spare buffer.
func (w *work) sortProbes() {
	n := len(w.probes)
	if n < 2 {
		return
	}
	w.order = w.order[:0]
	for i := range n {
		w.order = append(w.order, int32(i))
	}
	slices.SortFunc(w.order, func(a, b int32) int { return strings.Compare(w.probes[a].name, w.probes[b].name) })
	sorted := slices.Grow(w.spare[:0], n)
	for _, i := range w.order {
		sorted = append(sorted, w.probes[i])
	}
	clear(w.probes) // the spare holds no resources
	w.probes, w.spare = sorted, w.probes[:0]
}

// responsesLocked builds the variant's responses of each work that has
// any (one, unless over the send limit: sendlimit.go).
func (ss *session) responsesLocked(works []*work) []outMsg {
	var out []outMsg
	for _, w := range works {
		if ss.variant == xdstype.Delta {
			out = ss.deltaResponsesLocked(out, w)
		} else {
			out = ss.sotwResponsesLocked(out, w)
		}
	}
	return out
}

// logResponses logs each response at Debug with lg (nil when debug is off).
func logResponses(lg *zap.Logger, out []outMsg) {
	for _, m := range out {
		if lg == nil {
			break // debug is off: build no session logger for it
		}
		// Check first: the fields of a disabled entry are not built.
		if ce := lg.Check(zap.DebugLevel, "sending response"); ce != nil {
			ce.Write(zap.String("type_url", m.typeURL), zap.Int("items", m.count))
		}
	}
}

// smallDirty is the largest dirty set kept for reuse (steady state: an
// update changes one key or a few).
const smallDirty = 4

// resetDirtyLocked empties the dirty set once a round took all of it:
// kept for reuse when small, dropped when sized for a large change (an
// idle session keeps nothing sized for its initial sync).
func (ss *session) resetDirtyLocked() { ss.dirty.reset(smallDirty) }

// collectLocked takes the dirty set and returns, per type, the
// subscriptions to look up; the caller releases the round.
func (ss *session) collectLocked() *round {
	dirty := ss.dirty
	defer ss.resetDirtyLocked()
	ss.writer.roundLocked()
	ss.awaiting, ss.noted = nil, false // this round looks them up again (gather.go)
	rd := roundPool.Get().(*round)
	rd.sets = append(rd.sets, ss.sets...)
	clear(ss.sets)
	ss.sets = ss.sets[:0]
	for _, ts := range ss.types.all() {
		if ts.evalAll {
			ts.evalAll = false
			w := rd.get(ts)
			w.probes = slices.Grow(w.probes, ts.subs.len())
			for n, s := range ts.subs.all() {
				w.probes = append(w.probes, probe{name: n, key: ts.keyOf(n, s), collection: s.collection})
			}
			w.all = true
			continue
		}
		if len(ts.force) > 0 || hasUnreported(ts) {
			w := rd.get(ts)
			for n := range ts.force {
				if s, ok := ts.subs.get(n); ok {
					w.add(n, s)
				} else {
					w.addCollections(ts)
				}
			}
		}
	}
	for k := range dirty.all() {
		ts, ok := ss.types.get(k.TypeURL)
		if !ok {
			continue
		}
		w := rd.get(ts)
		ts.keyNamesLocked(k, w.add)
		if len(ts.colls) > 0 && k.Name != cache.Wildcard {
			// Maybe a member of a wildcard or glob collection: look up
			// just this key, not the whole collection.
			w.addMember(ts, k)
		}
	}
	if works := rd.active(); len(works) > 1 {
		slices.SortFunc(works, func(a, b *work) int { return typeOrder(a.ts.typeURL) - typeOrder(b.ts.typeURL) })
	}
	return rd
}

func hasUnreported(ts *typeState) bool {
	for _, u := range ts.unknown {
		if !u.reported {
			return true
		}
	}
	return false
}
