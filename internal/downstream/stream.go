package downstream

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The stream's run loop: run is the handler of every streaming method (set
// up, loop over requests, tear down), pump the goroutine that feeds it what
// Recv returns.

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
