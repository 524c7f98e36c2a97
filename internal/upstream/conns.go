package upstream

import (
	"sync"

	"google.golang.org/grpc"
)

// conns shares one gRPC connection per origin among the links that use it
// at the same time (an authority's link and its aggregation groups' links
// carry their own ADS streams over it), so a thousand groups toward one
// origin cost one TCP connection, not a thousand. A connection is closed
// when its last user releases it.
type conns struct {
	opts []grpc.DialOption // read-only after newConns
	mu   sync.Mutex
	by   map[string]*sharedConn // guarded by mu; by origin
}

type sharedConn struct {
	cc   *grpc.ClientConn
	refs int // guarded by conns.mu
}

func newConns(opts []grpc.DialOption) *conns {
	return &conns{opts: opts, by: make(map[string]*sharedConn)}
}

// get returns the connection to origin, creating it on first use; release
// gives it back (call it once).
func (c *conns) get(origin string) (*grpc.ClientConn, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.by[origin]
	if sc == nil {
		cc, err := grpc.NewClient(origin, c.opts...)
		if err != nil {
			return nil, nil, err
		}
		sc = &sharedConn{cc: cc}
		c.by[origin] = sc
	}
	sc.refs++
	var once sync.Once
	return sc.cc, func() { once.Do(func() { c.release(origin, sc) }) }, nil
}

func (c *conns) release(origin string, sc *sharedConn) {
	c.mu.Lock()
	sc.refs--
	last := sc.refs == 0
	if last {
		delete(c.by, origin)
	}
	c.mu.Unlock()
	if last {
		_ = sc.cc.Close() // nothing uses it any more; an error changes nothing
	}
}
