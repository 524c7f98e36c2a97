package downstream

import (
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/cache"
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
}

// work is what the writer evaluates for one type on one wake-up.
type work struct {
	ts     *typeState
	probes []*probe
	seen   map[string]struct{} // probe names already added
}

func (w *work) add(name string, s *sub) {
	if _, ok := w.seen[name]; ok {
		return
	}
	w.seen[name] = struct{}{}
	w.probes = append(w.probes, &probe{name: name, key: s.key, collection: s.collection})
}

func (w *work) addCollections(ts *typeState) {
	for n, s := range ts.colls {
		w.add(n, s)
	}
}

// addMember adds member key k of the collections of ts that contain it.
func (w *work) addMember(ts *typeState, k cache.Key) {
	for n, s := range ts.colls {
		if s.key.Stream != k.Stream || !s.contains(k) {
			continue
		}
		id := n + "\x00" + k.Name
		if _, ok := w.seen[id]; ok {
			continue
		}
		w.seen[id] = struct{}{}
		w.probes = append(w.probes, &probe{name: n, key: k, collection: true, member: true})
	}
}

// writeLoop is the writer: the only caller of send. It swaps out what
// changed, sends the newest state, and returns once nothing new arrived
// while it worked (the next wake-up starts a new writer).
func (ss *session) writeLoop() {
	for {
		msgs := ss.build()
		for _, m := range msgs {
			select {
			case <-ss.done:
				return
			default:
			}
			if err := ss.sendWithTimeout(m.msg); err != nil {
				ss.fail(err)
				return
			}
			ss.srv.m.responses.WithLabelValues(m.typeURL).Inc()
			ss.srv.m.responseResource.WithLabelValues(m.typeURL).Add(float64(m.count))
		}
		ss.mu.Lock()
		if !ss.rerun || ss.closed {
			ss.writing = false
			ss.mu.Unlock()
			return
		}
		ss.rerun = false
		ss.mu.Unlock()
	}
}

// sendWithTimeout sends m; if Send has not returned within the send
// timeout, the handler is told to end the stream as too slow.
func (ss *session) sendWithTimeout(m proto.Message) error {
	t := time.AfterFunc(ss.srv.sendTimeout, func() { ss.fail(ErrSlowClient) })
	err := ss.send(m)
	if !t.Stop() {
		return ErrSlowClient
	}
	return err
}

// outMsg is one response ready to send.
type outMsg struct {
	msg     proto.Message
	typeURL string
	count   int // resources and removals in it
}

// build turns what changed into responses. The cache is read without the
// session lock; the responses are built under it from the newest state.
func (ss *session) build() []outMsg {
	ss.mu.Lock()
	works := ss.collectLocked()
	ss.mu.Unlock()
	if len(works) == 0 {
		return nil
	}
	for _, w := range works {
		for _, p := range w.probes {
			if p.collection && !p.member {
				p.members, p.state = ss.srv.cache.Members(p.key)
			} else {
				p.res, p.state = ss.srv.cache.Get(p.key)
			}
		}
		sort.Slice(w.probes, func(i, j int) bool { return w.probes[i].name < w.probes[j].name })
	}
	var out []outMsg
	ss.mu.Lock()
	lg := ss.lg
	for _, w := range works {
		var m outMsg
		var ok bool
		if ss.variant == variantDelta {
			m, ok = ss.deltaResponseLocked(w)
		} else {
			m, ok = ss.sotwResponseLocked(w)
		}
		if ok {
			out = append(out, m)
		}
	}
	ss.mu.Unlock()
	for _, m := range out {
		lg.Debug("sending response", zap.String("type_url", m.typeURL), zap.Int("items", m.count))
	}
	return out
}

// collectLocked swaps out the dirty set and returns, per type, the
// subscriptions to look up.
func (ss *session) collectLocked() []*work {
	dirty := ss.dirty
	ss.dirty = make(map[cache.Key]struct{})
	ss.rerun = false // this round sees everything noted so far
	works := make(map[string]*work)
	get := func(ts *typeState) *work {
		w, ok := works[ts.typeURL]
		if !ok {
			w = &work{ts: ts, seen: make(map[string]struct{})}
			works[ts.typeURL] = w
		}
		return w
	}
	for _, ts := range ss.types {
		if ts.evalAll {
			ts.evalAll = false
			w := get(ts)
			for n, s := range ts.subs {
				w.add(n, s)
			}
			continue
		}
		if len(ts.force) > 0 || hasUnreported(ts) {
			w := get(ts)
			for n := range ts.force {
				if s, ok := ts.subs[n]; ok {
					w.add(n, s)
				} else {
					w.addCollections(ts)
				}
			}
		}
	}
	for k := range dirty {
		ts, ok := ss.types[k.TypeURL]
		if !ok {
			continue
		}
		w := get(ts)
		for _, n := range ts.byKey[k] {
			w.add(n, ts.subs[n])
		}
		if len(ts.colls) > 0 && k.Name != cache.Wildcard {
			// Maybe a member of a wildcard or glob collection: look up
			// just this key, not the whole collection.
			w.addMember(ts, k)
		}
	}
	out := make([]*work, 0, len(works))
	for _, w := range works {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return typeOrder(out[i].ts.typeURL) < typeOrder(out[j].ts.typeURL) })
	return out
}

func hasUnreported(ts *typeState) bool {
	for _, reported := range ts.unknown {
		if !reported {
			return true
		}
	}
	return false
}

// stillSubscribedLocked reports whether p still describes a subscription.
func stillSubscribedLocked(ts *typeState, p *probe) (*sub, bool) {
	s, ok := ts.subs[p.name]
	if !ok || s.collection != p.collection || (s.key != p.key && !p.member) {
		return nil, false
	}
	return s, true
}

// changed reports whether the client holding h lacks r.
func changed(h held, ok bool, r *cache.Resource) bool {
	if !ok || h.absent {
		return true
	}
	if h.res != nil {
		return h.res != r
	}
	// Known only by version (initial_resource_versions).
	return h.version != r.Version
}

// heartbeatOnly reports whether the client holding h needs only the TTL
// refresh of r, not its body: r is a heartbeat, or a revision with the
// version and the very body the client already has (the cache stores a
// heartbeat as such a revision with the new TTL).
func heartbeatOnly(h held, ok bool, r *cache.Resource) bool {
	if !ok || h.absent || h.version != r.Version {
		return false
	}
	return r.Heartbeat || (h.res != nil && h.res.Body == r.Body && r.TTL != nil)
}
