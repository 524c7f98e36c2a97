package loadgen

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// Stalled clients: a client of Config.StallEvery stops calling Recv while
// the fleet is stalled (Fleet.Stall), as a client whose main thread is
// blocked would: the server's sends to it wait once its HTTP/2 window is
// full. It resumes where it was, reading what was queued for it.

// stallWindow is the HTTP/2 stream and connection window of the stalling
// clients' connections: gRPC's smallest, which also turns off its window
// growth (BDP estimation).
const stallWindow = 64 << 10

// stallsPerConn is how many stalling clients share one connection.
const stallsPerConn = 100

// stalls reports whether client i is one that Stall stops.
func (c Config) stalls(i int) bool { return c.StallEvery > 0 && i%c.StallEvery == 0 }

// Stalled reports, per client, whether Stall stops it.
func (f *Fleet) Stalled() []bool {
	out := make([]bool, len(f.clients))
	for i := range out {
		out[i] = f.cfg.stalls(i)
	}
	return out
}

// stall is one Stall: until when, and a channel closed when the next
// Stall replaces it.
type stall struct {
	until time.Time
	next  chan struct{}
}

// Stall makes the stalling clients (Config.StallEvery) stop reading until
// d from now: each finishes the Recv it is in (it reads one more response
// when one arrives), then calls Recv again only once d has passed. A
// second Stall replaces the first (Stall(0) ends it).
func (f *Fleet) Stall(d time.Duration) {
	if old := f.stall.Swap(&stall{until: time.Now().Add(d), next: make(chan struct{})}); old != nil {
		close(old.next)
	}
}

// waitStall waits, before the client reads its next response, while the
// fleet stalls it; false when ctx ended meanwhile.
func (c *client) waitStall(ctx context.Context) bool {
	if !c.f.cfg.stalls(c.id) {
		return true
	}
	for {
		st := c.f.stall.Load()
		if st == nil {
			return true
		}
		d := time.Until(st.until)
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		case <-st.next:
			t.Stop()
		}
	}
}

// stallConnOptions are the dial options of the stalling clients'
// connections.
func stallConnOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(stallWindow), grpc.WithInitialConnWindowSize(stallWindow)}
}
