package relay

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/downstream"
)

// Draining. xDS streams never end by themselves, so a graceful stop would
// always wait out the whole grace period; and ending them all at one
// instant makes a whole fleet reconnect at once. drainStreams registers
// every stream in drainSet with the function that ends it; Close ends them
// in waves (endInWaves), then whatever is left (endAll), and any stream
// that opens after that at once.
// Ending a stream writes Unavailable to its client at once and ends the
// stream's context (downstream.EndStream): the client reconnects, to
// another relay, and a handler waiting in Recv (every xDS session) or on
// its context returns. The grace period is left to unary calls and REST
// polls in flight, and to handlers that wait on neither.

// drainedStatus is what a stream ended by the shutdown gets.
var drainedStatus = status.New(codes.Unavailable, "relay shutting down")

// drainSet holds the open streams' end functions.
type drainSet struct {
	mu   sync.Mutex
	next uint64            // guarded by mu
	open map[uint64]func() // guarded by mu
	// ended: endAll ran; a stream added since is ended at once. Guarded
	// by mu.
	ended bool
}

// add registers a stream's end function; remove forgets it once the
// stream ended. After endAll, end runs at once.
func (d *drainSet) add(end func()) (remove func()) {
	d.mu.Lock()
	if d.ended {
		d.mu.Unlock()
		end()
		return func() {}
	}
	defer d.mu.Unlock()
	if d.open == nil {
		d.open = make(map[uint64]func())
	}
	id := d.next
	d.next++
	d.open[id] = end
	return func() {
		d.mu.Lock()
		delete(d.open, id)
		d.mu.Unlock()
	}
}

// endAll ends every open stream, and every stream added from now on.
func (d *drainSet) endAll() {
	d.mu.Lock()
	d.ended = true
	d.mu.Unlock()
	for _, end := range d.take(0) {
		end()
	}
}

// take removes and returns up to n open streams (n <= 0: all).
func (d *drainSet) take(n int) []func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]func(), 0, min(max(n, 0), len(d.open)))
	for id, end := range d.open {
		if n > 0 && len(out) == n {
			break
		}
		out = append(out, end)
		delete(d.open, id)
	}
	return out
}

func (d *drainSet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}

// drainStreams is the stream interceptor that lets Close end every
// stream: in its wave, or with whatever is left (endAll). An end that
// comes after the stream ended (the client left first) does nothing.
func (r *Relay) drainStreams(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	remove := r.streams.add(func() { downstream.EndStream(ss.Context(), drainedStatus) })
	defer remove()
	return handler(srv, ss)
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
		for _, end := range r.streams.take(n) {
			end()
		}
		if r.streams.len() == 0 {
			return
		}
		t.Reset(interval)
	}
}
