package downstream

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The stream's run loop: run is the handler of every streaming method (set
// up, receive and handle requests, tear down). It is the only goroutine an
// idle stream costs: it waits in Recv. What ends the stream from elsewhere
// (fail: the writer's failure, SetAccess; the relay's drain, EndStream)
// writes the stream's status, which ends its context and so wakes Recv
// (streamend.go).

// run is the handler body shared by every streaming method: it receives
// and handles requests in this goroutine until the stream ends, and
// returns the stream's status; ctx is the stream's context.
func (ss *session) run(ctx context.Context, recv func() (any, error), handle func(any) error) error {
	ss.begin()
	return ss.end(ctx, ss.loop(ctx, recv, handle))
}

// begin lists and counts the stream as it starts.
//
//go:noinline
func (ss *session) begin() {
	srv := ss.srv
	srv.addSession(ss)
	srv.m.streams.WithLabelValues(string(ss.variant)).Inc()
	srv.counts.stream(ss.variant, 1)
}

// end tears the stream down once loop returned err, and returns its
// status.
//
//go:noinline
func (ss *session) end(ctx context.Context, err error) error {
	srv := ss.srv
	ss.stopWriter(ss.endStatus(ctx, err))
	err = ss.endStatus(ctx, err)

	sc := getScratch()
	ss.mu.Lock()
	sc.keys = ss.keysLocked(sc.keys)
	ss.endPropagationLocked() // what it was sent and did not answer is gone
	ss.mu.Unlock()
	if len(sc.keys) > 0 {
		srv.cache.Unwatch(ss, sc.keys...)
	}
	sc.release()
	srv.removeSession(ss)
	srv.m.streams.WithLabelValues(string(ss.variant)).Dec()
	srv.counts.stream(ss.variant, -1)
	ss.countTypesDone()
	return err
}

// stopWriter closes the writer: none starts any more, and one running
// starts no Send; it waits for it, so nothing is sent after the handler
// returns. A Send waiting on a client that does not read returns when the
// stream's context ends: at once when the stream ended already (fail, the
// client left), else once the send watch ends it (park.go): with end, the
// handler's status, when the session is parked (now) or would be parked.
func (ss *session) stopWriter(end error) {
	ss.mu.Lock()
	writerEnd := ss.writer.closeLocked()
	sets := ss.sets
	ss.sets = nil
	ss.endGathersLocked()
	ss.stopped.Store(true)
	ss.ending = status.Convert(end)
	ending, parked := ss.ending, ss.parked
	ss.mu.Unlock()
	for _, cs := range sets {
		cs.Done() // no response will carry them any more
	}
	if parked {
		ss.endWith(ending) // the client does not read: its Send would never return
	}
	if writerEnd != nil {
		<-writerEnd
	}
}

// loop receives and handles requests until the stream ends. It returns
// handle's error, what ended Recv (io.EOF: the client closed its side), or
// the context's error once the stream's context ended.
func (ss *session) loop(ctx context.Context, recv func() (any, error), handle func(any) error) error {
	for {
		if err := ss.throttle(ctx); err != nil { // budget.go
			return err
		}
		m, err := recv()
		if err == nil {
			err = ctx.Err() // ended meanwhile: handle nothing more
		}
		if err == nil {
			err = ss.apply(m, handle)
		}
		if err != nil {
			return err
		}
	}
}

// apply handles request m (handle) with the writer held.
//
//go:noinline
func (ss *session) apply(m any, handle func(any) error) error {
	ss.charge(m)
	pol := ss.srv.access.Load()
	ss.beginRequest()
	err := handle(m)
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
	}
	return err
}

// fail ends the stream for err, unless it ended already (the first reason
// wins): the client gets err's status at once (ErrSlowClient:
// ResourceExhausted, counted), and the handler, woken from Recv, returns
// it.
func (ss *session) fail(err error) {
	st := status.Convert(err)
	if isErr(err, ErrSlowClient) {
		st = ss.slowStatus()
	}
	if ss.endWith(st) && isErr(err, ErrSlowClient) {
		ss.countSlow()
	}
}

// endWith ends the stream with st unless it ended already (the first
// status wins); it reports whether st is the one.
func (ss *session) endWith(st *status.Status) bool {
	if !ss.failed.CompareAndSwap(nil, st) {
		return false
	}
	_ = ss.stream.WriteStatus(st) // fails only when the stream already ended
	return true
}

// endStatus is the stream's status once loop returned err: the one fail
// ended it with, else the end of the stream's context (the client left),
// else err; a client that closed its side ends it OK.
func (ss *session) endStatus(ctx context.Context, err error) error {
	if st := ss.failed.Load(); st != nil {
		return st.Err()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr).Err()
	}
	if isEOF(err) {
		return nil
	}
	return err
}

// slowStatus is the status of a client cut off as too slow.
func (ss *session) slowStatus() *status.Status {
	return status.Newf(codes.ResourceExhausted, "%v (%v)", ErrSlowClient, ss.srv.sendTimeout())
}

// countSlow counts and logs a client cut off as too slow.
func (ss *session) countSlow() {
	ss.srv.m.slowDisconnects.Inc()
	if ss.srv.slowHook != nil {
		ss.srv.slowHook()
	}
	ss.logger().Warn("client too slow, disconnecting", zap.Duration("send_timeout", ss.srv.sendTimeout()))
}
