package integration

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// gatedListener is a loopback listener an origin serves on, behind a gate
// the test shuts and opens: the origin going down and coming back at a
// fixed address, with every connection attempt counted. Shut, it ends
// every connection it handed out and closes each new one as it arrives (a
// dead origin behind a stable address); open, it hands connections to the
// server. Every arrival is recorded with its time, so a test can read the
// relay's reconnect attempts and the waits between them.
type gatedListener struct {
	net.Listener
	t testing.TB

	mu       sync.Mutex
	shut     bool                  // guarded by mu
	conns    map[net.Conn]struct{} // handed to the server while open; guarded by mu
	arrivals []arrival             // guarded by mu
	poke     chan struct{}         // 1 slot: a connection arrived
}

// arrival is one connection attempt: when, and whether the gate refused it.
type arrival struct {
	at      time.Time
	refused bool
}

// newGatedOrigin is a LinearCache origin (as newGCPOrigin) serving behind
// a gatedListener, open at first.
func newGatedOrigin(t testing.TB) (*gcpOrigin, *gatedListener) {
	t.Helper()
	return gateOrigin(t, linearOrigin())
}

// gateOrigin serves o (not serving yet) behind a gatedListener, open at
// first.
func gateOrigin(t testing.TB, o *gcpOrigin) (*gcpOrigin, *gatedListener) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedListener{Listener: lis, t: t, conns: make(map[net.Conn]struct{}), poke: make(chan struct{}, 1)}
	return serveOrigin(t, o, g), g
}

// Accept returns the next connection that arrives while the gate is open;
// those that arrive while it is shut are closed at once.
func (g *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		refused := g.shut
		g.arrivals = append(g.arrivals, arrival{at: time.Now(), refused: refused})
		if !refused {
			g.conns[c] = struct{}{}
		}
		g.mu.Unlock()
		select {
		case g.poke <- struct{}{}:
		default:
		}
		if refused {
			_ = c.Close() // refused: the relay sees its connection fail
			continue
		}
		return &gatedConn{Conn: c, g: g}, nil
	}
}

// gatedConn forgets itself in its listener when the server closes it.
type gatedConn struct {
	net.Conn
	g *gatedListener
}

func (c *gatedConn) Close() error {
	c.g.mu.Lock()
	delete(c.g.conns, c.Conn)
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// down shuts the gate and ends every connection the server holds: the
// relay's streams fail as if the origin had died.
func (g *gatedListener) down() {
	g.mu.Lock()
	g.shut = true
	conns := g.conns
	g.conns = make(map[net.Conn]struct{})
	g.mu.Unlock()
	for c := range conns {
		_ = c.Close() // the server's own close of it then fails; nothing to do
	}
}

// up opens the gate: the next connection attempt reaches the origin.
func (g *gatedListener) up() {
	g.mu.Lock()
	g.shut = false
	g.mu.Unlock()
}

// refusedSince lists the refused arrivals from index from on.
func (g *gatedListener) refusedSince(from int) []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []time.Time
	for _, a := range g.arrivals[from:] {
		if a.refused {
			out = append(out, a.at)
		}
	}
	return out
}

// count is how many connections have arrived so far.
func (g *gatedListener) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.arrivals)
}

// waitRefused waits until n connections have been refused since arrival
// index from.
func (g *gatedListener) waitRefused(from, n int) {
	g.t.Helper()
	xdstest.Await(g.t, "gated origin: connection attempts refused", g.poke, func() error {
		if got := len(g.refusedSince(from)); got < n {
			return fmt.Errorf("%d refused, want %d", got, n)
		}
		return nil
	})
}
