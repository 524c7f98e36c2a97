package upstream

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// conns shares one gRPC connection per origin and credentials among the
// links that use it at the same time (an authority's link and its
// aggregation groups' links carry their own ADS streams over it), so a
// thousand groups toward one origin cost one TCP connection, not a
// thousand. Authorities with different credentials (Authority.Credentials:
// other CA, other client certificate) to the same address get a
// connection each: a connection is only ever used with the TLS it was
// made with. A connection is closed when its last user gives it back.
type conns struct {
	opts []grpc.DialOption // read-only after newConns
	mu   sync.Mutex
	by   map[connKey]*sharedConn // guarded by mu
}

// connKey identifies a shared connection: the origin's address and the
// credentials it was dialled with (nil: the Manager's dial options).
type connKey struct {
	origin string
	creds  credentials.TransportCredentials
}

type sharedConn struct {
	cc   *grpc.ClientConn
	refs int // guarded by conns.mu
}

func newConns(opts []grpc.DialOption) *conns {
	return &conns{opts: opts, by: make(map[connKey]*sharedConn)}
}

// dialOptions are the options to dial an origin with creds (nil: the
// Manager's own).
func (c *conns) dialOptions(creds credentials.TransportCredentials) []grpc.DialOption {
	if creds == nil {
		return c.opts
	}
	// The later option wins over the default plaintext credentials.
	return append(c.opts[:len(c.opts):len(c.opts)], grpc.WithTransportCredentials(creds))
}

// get returns the connection to origin with creds, creating it on first
// use; the func returned gives it back (call it once).
func (c *conns) get(origin string, creds credentials.TransportCredentials) (*grpc.ClientConn, func(), error) {
	key := connKey{origin: origin, creds: creds}
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.by[key]
	if sc == nil {
		// grpc.NewClient does no I/O (it connects on first use), so it
		// may run under the lock.
		cc, err := grpc.NewClient(origin, c.dialOptions(creds)...)
		if err != nil {
			return nil, nil, err
		}
		sc = &sharedConn{cc: cc}
		c.by[key] = sc
	}
	sc.refs++
	var once sync.Once
	return sc.cc, func() { once.Do(func() { c.put(key, sc) }) }, nil
}

// put gives back a use of sc, closing it after its last.
func (c *conns) put(key connKey, sc *sharedConn) {
	c.mu.Lock()
	sc.refs--
	last := sc.refs == 0
	if last {
		delete(c.by, key)
	}
	c.mu.Unlock()
	if last {
		_ = sc.cc.Close() // nothing uses it any more; an error changes nothing
	}
}
