package relay

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Draining. xDS streams never end by themselves, so a graceful stop would
// always wait out the whole grace period; and ending them all at one
// instant makes a whole fleet reconnect at once. drainStreams registers
// every stream in drainSet with a context of its own; Close ends them in
// waves (endInWaves), then whatever is left when r.life.draining ends. Handlers
// that honour their stream's context (every xDS session) return at once;
// their clients see Unavailable and reconnect, to another relay. The grace
// period is left to unary calls and REST polls in flight, and to handlers
// that do not honour the context.

// errDrained is the cause of a stream context ended by the shutdown.
var errDrained = errors.New("relay shutting down")

// drainSet holds the open streams' cancel functions.
type drainSet struct {
	mu   sync.Mutex
	next uint64                             // guarded by mu
	open map[uint64]context.CancelCauseFunc // guarded by mu
}

func (d *drainSet) add(cancel context.CancelCauseFunc) (remove func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open == nil {
		d.open = make(map[uint64]context.CancelCauseFunc)
	}
	id := d.next
	d.next++
	d.open[id] = cancel
	return func() {
		d.mu.Lock()
		delete(d.open, id)
		d.mu.Unlock()
	}
}

// take removes and returns up to n open streams (n <= 0: all).
func (d *drainSet) take(n int) []context.CancelCauseFunc {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]context.CancelCauseFunc, 0, min(max(n, 0), len(d.open)))
	for id, c := range d.open {
		if n > 0 && len(out) == n {
			break
		}
		out = append(out, c)
		delete(d.open, id)
	}
	return out
}

func (d *drainSet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}

// drainStreams is the stream interceptor that gives every stream a context
// Close can end: in its wave, or when r.life.draining ends.
func (r *Relay) drainStreams(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := context.WithCancelCause(ss.Context())
	defer cancel(nil)
	remove := r.streams.add(cancel)
	defer remove()
	stop := context.AfterFunc(r.life.draining, func() { cancel(errDrained) })
	defer stop()
	err := handler(srv, drainableStream{ServerStream: ss, ctx: ctx})
	if errors.Is(context.Cause(ctx), errDrained) && ss.Context().Err() == nil {
		// Ended by the shutdown, not by the client.
		return status.Error(codes.Unavailable, errDrained.Error())
	}
	return err
}

// endInWaves ends the open streams in waves: the streams open when it
// starts, split into waves equal parts, one part every spread/waves, the
// first at once; never more waves than streams, and none once no stream
// is left. Streams opened meanwhile (before the GOAWAY reached their
// client) end with the last wave. ctx ends it early.
func (r *Relay) endInWaves(ctx context.Context, waves int, spread time.Duration) {
	total := r.streams.len()
	if total == 0 {
		return
	}
	waves = min(max(waves, 1), total)
	per := (total + waves - 1) / waves
	interval := spread / time.Duration(waves)
	r.lg.Info("ending streams in waves", zap.Int("streams", total), zap.Int("waves", waves), zap.Duration("interval", interval))
	t := time.NewTimer(0)
	defer t.Stop()
	for i := range waves {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := per
		if i == waves-1 {
			n = 0 // the last wave takes every stream left
		}
		for _, cancel := range r.streams.take(n) {
			cancel(errDrained)
		}
		if r.streams.len() == 0 {
			return
		}
		t.Reset(interval)
	}
}

// drainableStream replaces a stream's context.
type drainableStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s drainableStream) Context() context.Context { return s.ctx }
