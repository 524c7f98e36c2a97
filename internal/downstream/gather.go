package downstream

import (
	"slices"
	"time"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// The gather window: one request, one response, even from a cold relay.
//
// A client that subscribes to many names at once (an Envoy's EDS request
// for its clusters, a reconnect) gets them from an origin in one response.
// A relay that does not hold them yet asks its origin, whose answer may
// come in pieces: the upstream requests for a burst of clients each carry
// only the names new to the relay, so one client's names are spread over
// several of them, each answered on its own (one origin change, one Flush
// each). Without a gather, each piece would be one more response.
//
// So the names a request subscribes that the client is owed an answer
// about (forced ones) are awaited together (typeState.gather): while one
// of them is still pending in the cache, the writer holds all of them back
// (they stay forced, so every round looks them up again) and sends
// everything else of the type as usual; once none is pending (present,
// absent, or with a resource error), they go out together, in one
// response (several, each within max_send_msg_size, when they would not
// fit in one: sendlimit.go). A name the origin is
// slow to answer holds the others back for at most the window
// (Options.GatherWindow), armed when the writer first holds them back:
// then what is known goes out, and the rest as it comes. Names not
// awaited are never held back. A request made during a gather adds its
// names to it without extending the window.

// gathering is one type's gather while it is on. Guarded by the session's
// mu, like the typeState that holds it.
type gathering struct {
	names []string    // the names awaited; sorted while sorted is set
	stop  func() bool // stops the window's timer; nil until armed
	// sorted: names are sorted and without repeats. A request's names
	// are sorted only once the writer asks of one (awaits): one whose
	// names are all cached is never asked, and never sorts them.
	sorted bool
}

// awaits reports whether name is one of the names awaited.
func (g *gathering) awaits(name string) bool {
	g.sort()
	_, ok := slices.BinarySearch(g.names, name)
	return ok
}

// sort sorts the names awaited and drops repeats, unless they are sorted.
func (g *gathering) sort() {
	if !g.sorted {
		slices.Sort(g.names)
		g.names = slices.Compact(g.names)
		g.sorted = true
	}
}

// timeAfterFunc is time.AfterFunc as Server.afterFunc.
func timeAfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// gatherLocked awaits names (subscribed by one request, owed an answer;
// the slice is handed over) on ts together: it starts the type's gather,
// or adds them to the one on. Names unsubscribed since leave it first, and
// repeats once there are more than names subscribed, so what a gather
// keeps stays within what the stream holds (max_names_per_stream),
// however many requests come while it is on.
func (ss *session) gatherLocked(ts *typeState, names []string) {
	if ss.srv.gatherWindow <= 0 || len(names) == 0 {
		return
	}
	g := ts.gather
	if g == nil {
		ts.gather = &gathering{names: names} // the caller's, handed over
		return
	}
	g.names = slices.DeleteFunc(g.names, func(n string) bool {
		return !ts.subs.has(n)
	})
	g.names = append(g.names, names...)
	g.sorted = false
	if len(g.names) > ts.subs.len() {
		g.sort() // names asked again: dropping repeats keeps it within subs
	}
}

// gatherRoundLocked sets what w's diff holds back in round rd, if its
// type is gathering, and keeps the round's origin changes of that type for
// the response that will carry them. The keys of the names it holds back
// that are still pending become the session's awaiting.
func (ss *session) gatherRoundLocked(rd *round, w *work) {
	if w.diff.hold = ss.holdLocked(w); w.diff.hold == nil {
		return
	}
	ss.keepSetsLocked(rd, w.ts.typeURL)
	n := 0 // the awaiting set is sized once, not grown key by key
	for i := range w.probes {
		if ss.awaitedLocked(w, &w.probes[i]) {
			n++
		}
	}
	if n == 0 {
		return
	}
	if ss.awaiting == nil {
		ss.awaiting = make(map[cache.Key]struct{}, n)
	}
	for i := range w.probes {
		if p := &w.probes[i]; ss.awaitedLocked(w, p) {
			ss.awaiting[p.key] = struct{}{}
		}
	}
}

// awaitedLocked reports whether probe p of w, held back, is to be awaited:
// pending when this round looked it up, and not announced since. A
// collection's answer is announced as its members (or itself, when
// empty): keys not awaited, so they wake the writer. A key announced since
// the round began (dirty again: the round took the dirty set before its
// lookups) may have been answered after its lookup; its Notify came while
// nothing was awaited, so it is noted instead, and the Flush that ends its
// announcement wakes the writer to look again. Awaiting it would leave
// the writer idle until the window passes, the answer already in.
func (ss *session) awaitedLocked(w *work, p *probe) bool {
	if p.collection || answered(p) || !w.diff.hold.awaits(p.name) {
		return false
	}
	if ss.dirty.has(p.key) {
		ss.noted = true
		return false
	}
	return true
}

// While names are held back, the cache announces each piece of the
// origin's answer to them as a change of its own. Waking the writer for
// each would make it look them all up again to hold them back again: a
// burst of clients would cost a round per client and piece. So the keys
// held back and still pending are noted (awaiting) and a Flush that brings
// nothing else (notified keys all awaited, some still to come) wakes no
// writer; the last of them, anything else, a request or the window does.
// Every resolution of a pending name is announced to its watchers, so a
// name resolved is never waited on past its Notify. Only an idle writer
// is spared: a running one may have looked up before the change, and
// runs another round.

// noteAwaitedLocked notes that key k was notified: one awaited less, or
// something else (noted).
func (ss *session) noteAwaitedLocked(k cache.Key) {
	if _, ok := ss.awaiting[k]; !ok {
		ss.noted = true
		return
	}
	delete(ss.awaiting, k)
	if len(ss.awaiting) == 0 {
		ss.awaiting, ss.noted = nil, true
	}
}

// quietLocked reports whether a Flush may leave the writer idle: it only
// brought awaited keys, and some are still to come.
func (ss *session) quietLocked() bool {
	quiet := !ss.noted && !ss.writer.runningLocked()
	ss.noted = false
	return quiet
}

// holdLocked decides, from w's probes just looked up, whether w's type is
// still gathering: while an awaited name is pending, it returns the
// gathering (the diff holds its names back) and arms the window if it is
// not yet; once none is, the gather ends (nil).
func (ss *session) holdLocked(w *work) *gathering {
	ts := w.ts
	g := ts.gather
	if g == nil {
		return nil
	}
	for i := range w.probes {
		p := &w.probes[i]
		if p.member || answered(p) || !g.awaits(p.name) || !stillSubscribedLocked(ts, p) {
			continue
		}
		if g.stop == nil {
			g.stop = ss.srv.afterFunc(ss.srv.gatherWindow, func() { ss.gatherExpired(ts, g) })
		}
		return g
	}
	ss.endGatherLocked(ts)
	return nil
}

// gatherExpired ends gather g of ts when its window passes while it is
// still on, and wakes the writer to send what is known.
func (ss *session) gatherExpired(ts *typeState, g *gathering) {
	ss.mu.Lock()
	if ts.gather != g || ss.writer.closedLocked() {
		ss.mu.Unlock()
		return
	}
	ts.gather = nil
	ss.awaiting, ss.noted = nil, false
	ss.srv.m.gatherExpired.WithLabelValues(typeLabel(ts.typeURL)).Inc()
	var start chan struct{}
	if ss.hasWorkLocked() {
		start = ss.wakeLocked()
	}
	ss.mu.Unlock()
	if start != nil {
		ss.startWriter(start)
	}
}

// endGatherLocked ends ts's gather, if on, and stops its window.
func (ss *session) endGatherLocked(ts *typeState) {
	if g := ts.gather; g != nil && g.stop != nil {
		g.stop()
	}
	ts.gather = nil
	ss.awaiting, ss.noted = nil, false // recomputed by the next round that holds back
}

// endGathersLocked ends every gather of the session (its stream ends).
func (ss *session) endGathersLocked() {
	for _, ts := range ss.types.all() {
		ss.endGatherLocked(ts)
	}
}

// keepSetsLocked hands the origin changes of typeURL that round rd took
// back to the session when names of that type were held back: the
// response that carries them is still to come
// (xds_relay_fanout_duration_seconds).
func (ss *session) keepSetsLocked(rd *round, typeURL string) {
	if ss.writer.closedLocked() {
		return // the handler returned: nothing is sent any more
	}
	kept := rd.sets[:0]
	for _, cs := range rd.sets {
		if cs.TypeURL() == typeURL && len(ss.sets) < maxPendingSets {
			ss.sets = append(ss.sets, cs)
			continue
		}
		kept = append(kept, cs)
	}
	clear(rd.sets[len(kept):])
	rd.sets = kept
}

// answered reports whether a probe's lookup answers its name: present,
// absent, or pending with a resource error (the client is sent the error).
func answered(p *probe) bool { return p.state != cache.StatePending || p.err != nil }

// holdsBack reports whether the diff holds name back (an awaited name
// while the type is gathering).
func (d *diff) holdsBack(name string) bool { return d.hold != nil && d.hold.awaits(name) }
