package downstream

import (
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Slow clients: every Send is watched by a timer of send_timeout (the
// send watch). A Send still waiting when it fires is a client that does
// not drain its stream, and the policy (downstream.slow_clients) decides:
//
//   - park (the default): the stream stays. The session is parked: the
//     origin changes its round and its pending list carry are marked done
//     (so xds_relay_fanout_duration_seconds is not delayed by it) and,
//     until the Send returns, Flush takes no more of them; what changes
//     meanwhile is only marked in the dirty set, one entry per subscribed
//     key at most. When the client reads again, the Send returns, the
//     writer unparks and its next round sends the newest state, once.
//   - disconnect: the stream is ended with ResourceExhausted (fail) and
//     counted; the client reconnects.
//
// What a parked stream has, all bounded by its subscriptions and sizes,
// none by the number of changes: gRPC's write quota (64 KiB) plus the one
// response queued past it (gRPC queues a message whole once the quota is
// positive), the response its Send waits to queue (both reference the
// revisions' shared encodings, cache.Resource.Encoding, and keep those
// revisions alive), its writer goroutine, and the dirty set.
//
// A handler that returns while its writer waits in Send (the client sent
// a bad request, or closed its side) ends the stream with its own status
// when the send watch fires or, parked already, at once (stopWriter), so it
// never waits on a client that does not read.

// SlowClients is what happens to a client whose Send waited send_timeout
// (config downstream.slow_clients).
type SlowClients string

const (
	// ParkSlowClients keeps the stream; the client gets the newest state
	// once when it reads again. The default.
	ParkSlowClients SlowClients = "park"
	// DisconnectSlowClients ends the stream with ResourceExhausted.
	DisconnectSlowClients SlowClients = "disconnect"
)

// The send watch's states (sendWatch.state).
const (
	watchIdle    int32 = iota // no Send watched
	watchSending              // a Send is under way
	watchDone                 // the Send returned after the timer fired, before its func decided
	watchParked               // the timer's func parked the session
	watchCut                  // the timer's func ended the stream
)

// sendWatch watches the writer's Sends. Owned by the writer; a watch
// whose timer fired is not used again (its func runs once, on its own
// goroutine, and settles the state of the Send it fired during).
type sendWatch struct {
	ss    *session
	timer *time.Timer // fires sendTimeout into a Send: fired
	// state: the writer moves it idle → sending → idle, or, once the
	// timer fired, sending → done; fired moves it sending → parked or
	// cut. Whoever moves it from sending decides.
	state atomic.Int32
}

// watchedSend sends m under the send watch (see above). The watch is the
// session's, reused by every Send while its timer does not fire (about
// 100 bytes kept while the session is idle, rather than a timer made per
// writer, which would add allocations to every fan-out).
func (ss *session) watchedSend(m *encodedResponse) error {
	w := ss.watch
	if w == nil {
		w = &sendWatch{ss: ss}
		w.state.Store(watchSending)
		w.timer = time.AfterFunc(ss.srv.sendTimeout(), w.fired)
		ss.watch = w
	} else {
		w.state.Store(watchSending)
		w.timer.Reset(ss.srv.sendTimeout())
	}
	ss.responsesSent.Add(1) // before: the client may answer at once (budget.go)
	err := ss.send(m)
	if w.timer.Stop() {
		w.state.Store(watchIdle)
		return err
	}
	ss.watch = nil // fired: its func settles this Send, the next has a new watch
	if w.state.CompareAndSwap(watchSending, watchDone) {
		return err // returned before the func decided: drained in time
	}
	if w.state.Load() == watchCut {
		return ErrSlowClient
	}
	ss.unpark()
	return err
}

// fired is the send watch's timer: the Send has waited send_timeout.
func (w *sendWatch) fired() {
	ss := w.ss
	ss.mu.Lock()
	var end *status.Status // the stream ends with it; nil: parked
	slow := false
	switch {
	case ss.srv.slowClients() == DisconnectSlowClients:
		end, slow = ss.slowStatus(), true
	case ss.stopped.Load():
		end = ss.endingLocked() // the handler returns: end the stream now
	}
	if end != nil {
		cut := w.state.CompareAndSwap(watchSending, watchCut)
		ss.mu.Unlock()
		if cut && ss.endWith(end) && slow {
			ss.countSlow()
		}
		return
	}
	if !w.state.CompareAndSwap(watchSending, watchParked) {
		ss.mu.Unlock()
		return // the Send returned meanwhile
	}
	ss.parked = true
	sets := ss.takeSetsLocked()
	ss.mu.Unlock()
	for _, cs := range sets {
		cs.Done() // no response of this session waits for them any more
	}
	ss.srv.m.parks.Inc()
	ss.srv.m.parked.Inc()
	ss.srv.counts.parked.Add(1)
	if ss.srv.parkHook != nil {
		ss.srv.parkHook()
	}
	ss.logger().Info("client not draining its stream: parked until it reads", zap.Duration("send_timeout", ss.srv.sendTimeout()))
}

// takeSetsLocked takes the origin changes the session has: those of
// the round being sent (their responses wait on a client that does not
// read) and those noted since. Called by fired once it parked the
// session: the writer, waiting in Send, leaves the round alone until it
// has taken mu in unpark.
func (ss *session) takeSetsLocked() []*cache.ChangeSet {
	var sets []*cache.ChangeSet
	if rd := ss.sending; rd != nil {
		sets = append(sets, rd.sets...)
		clear(rd.sets)
		rd.sets = rd.sets[:0]
	}
	sets = append(sets, ss.sets...)
	clear(ss.sets)
	ss.sets = ss.sets[:0]
	return sets
}

// unpark: the parked session's Send returned (the client read, or the
// stream ended).
func (ss *session) unpark() {
	ss.mu.Lock()
	ss.parked = false
	ss.mu.Unlock()
	ss.srv.m.parked.Dec()
	ss.srv.counts.parked.Add(-1)
	ss.logger().Info("parked client reads again")
}

// endingLocked is the status the stream ends with when the handler
// returned while its writer waits in Send: the handler's (stopWriter),
// else the slow-client status.
func (ss *session) endingLocked() *status.Status {
	if ss.ending == nil {
		return ss.slowStatus()
	}
	return ss.ending
}

// slowClients is the slow-client policy in use.
func (s *Server) slowClients() SlowClients {
	if s.disconnectSlow.Load() {
		return DisconnectSlowClients
	}
	return ParkSlowClients
}

// SetSlowClients replaces Options.SlowClients.
func (s *Server) SetSlowClients(p SlowClients) error {
	if err := p.check(); err != nil {
		return err
	}
	s.disconnectSlow.Store(p == DisconnectSlowClients)
	return nil
}

// check refuses a policy that is neither; "" is the default, park.
func (p SlowClients) check() error {
	switch p {
	case ParkSlowClients, DisconnectSlowClients, "":
		return nil
	}
	return fmt.Errorf("downstream: slow clients %q: want %q or %q (the config's downstream.slow_clients)", p, ParkSlowClients, DisconnectSlowClients)
}
