package upstream

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Transport and glob modes, as config spells them.
const (
	TransportDelta = "delta"
	TransportSotW  = "sotw"
	GlobNative     = "native"
	GlobEmulated   = "emulated"
	// FileOriginPrefix marks an origin that is a directory of resource files.
	FileOriginPrefix = "file://"
)

// Authority is one authority's upstream: its origins in failover order.
type Authority struct {
	// Name is the authority (cache.StreamID.Authority).
	Name string
	// Origins are "host:port" control planes or "file://DIR" directories,
	// tried in order.
	Origins []string
	// Transport is TransportDelta (default, "") or TransportSotW.
	Transport string
	// GlobCollections is GlobNative (default, "") or GlobEmulated. SotW
	// transports always emulate globs.
	GlobCollections string
}

// Backoff paces reconnects: the n-th wait is min(Initial*Multiplier^n, Max)
// randomised by ±Jitter of itself.
type Backoff struct {
	// Initial wait. Default 250ms.
	Initial time.Duration
	// Max wait. Default 30s.
	Max time.Duration
	// Multiplier per failed attempt. Default 2.
	Multiplier float64
	// Jitter fraction in [0, 1]. Default 0.2 (0 is replaced by the default;
	// use a tiny value for almost none).
	Jitter float64
}

// Options configure a Manager.
type Options struct {
	// Authorities the relay serves. Streams of an unknown authority are
	// refused (logged; their keys stay pending).
	Authorities []Authority
	// Node is the relay's own node, presented to origins when no Subscribe
	// call carried one.
	Node *corev3.Node
	// Backoff between reconnect attempts.
	Backoff Backoff
	// ConnectTimeout bounds connecting to one origin. Default 5s.
	ConnectTimeout time.Duration
	// FailbackInterval: while a stream is served by an origin other than
	// its authority's first, the first is probed this often, and the
	// stream moves back to it once it accepts a connection. Default 5m.
	FailbackInterval time.Duration
	// DialOptions are added to the defaults (plaintext credentials unless
	// these set others, connect backoff and timeout from above).
	DialOptions []grpc.DialOption
	// Cache receives what origins send (Apply). Required.
	Cache *cache.Cache
	// Logger; nil: no logging.
	Logger *zap.Logger
	// Registry for the upstream metrics; nil: not registered.
	Registry prometheus.Registerer
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 250 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = 2
	}
	if b.Jitter <= 0 || b.Jitter > 1 {
		b.Jitter = 0.2
	}
	return b
}
