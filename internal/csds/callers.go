package csds

import (
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
)

// A caller is who opens CSDS streams: the verified client certificate's
// first URI SAN, else its first DNS SAN (mutual TLS), else the remote IP
// address. Each caller keeps at most MaxStreamsPerCaller
// StreamClientStatus streams at once: a stream can keep two reports of up
// to DefaultMaxBytes while its caller does not read (stream.go), so the
// bound is what one caller can make the relay keep. One more stream is
// refused with ResourceExhausted and counted; other callers are served.

// callerOf names the caller of identity id at addr.
func callerOf(id access.Identity, addr net.Addr) string {
	switch {
	case len(id.URISANs) > 0:
		return "uri_san " + id.URISANs[0]
	case len(id.DNSSANs) > 0:
		return "dns_san " + id.DNSSANs[0]
	case addr == nil:
		return "unknown address"
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		host = addr.String()
	}
	return "ip " + host
}

// callers counts each caller's open StreamClientStatus streams.
type callers struct {
	max  int            // read-only after newCallers
	mu   sync.Mutex     // guards open
	open map[string]int // guarded by mu; caller → its open streams, never 0
}

func newCallers(max int) *callers {
	return &callers{max: max, open: make(map[string]int)}
}

// acquire takes a stream place for caller; leave gives it back. A
// caller at its bound gets ResourceExhausted (ErrTooManyStreams).
func (c *callers) acquire(caller string) (leave func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[caller] >= c.max {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf("%v: %s has %d open, the most csds_max_streams_per_caller allows",
			ErrTooManyStreams, caller, c.max))
	}
	c.open[caller]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.open[caller]--; c.open[caller] == 0 {
			delete(c.open, caller)
		}
	}, nil
}
