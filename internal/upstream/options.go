package upstream

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// Glob modes, as config spells them (transports: xdstype.Transport*).
const (
	GlobNative   = "native"
	GlobEmulated = "emulated"
	// FileOriginPrefix marks an origin that is a directory of resource files.
	FileOriginPrefix = "file://"
)

// Authority is one authority's upstream: its origins in failover order.
type Authority struct {
	// Name is the authority (cache.LinkID.Authority).
	Name string
	// Origins are "host:port" control planes or "file://DIR" directories,
	// tried in order.
	Origins []string
	// Transport is xdstype.TransportDelta (default, ""), xdstype.TransportSotW,
	// xdstype.TransportDeltaPerType or xdstype.TransportSotWPerType.
	Transport string
	// GlobCollections is GlobNative or GlobEmulated; "" is GlobNative over
	// delta and GlobEmulated over SotW. Native over SotW sends the glob URL
	// itself in resource_names (TP1 globs are valid in SotW too), as to
	// another relay.
	GlobCollections string
	// Credentials secure the connections to this authority's origins
	// (internal/creds.TLSCredentials); nil: the Manager's, plaintext unless
	// Options.DialOptions set others. Connections to an origin are shared
	// only by authorities with the same Credentials value, so give
	// authorities with equal settings one value (a pointer) and others
	// their own.
	Credentials credentials.TransportCredentials
	// PerRPC is sent on each stream to this authority's origins
	// (internal/creds.BearerCredentials); nil: nothing.
	PerRPC credentials.PerRPCCredentials
}

// Backoff paces reconnects: the n-th wait is min(Initial*Multiplier^n, Max)
// randomised by ±Jitter of itself. Every field is required (New rejects
// zero values); the relay passes config's upstream.backoff, whose defaults
// are config.DefaultBackoff*.
type Backoff struct {
	// Initial wait; > 0.
	Initial time.Duration
	// Max wait; >= Initial.
	Max time.Duration
	// Multiplier per failed attempt; >= 1.
	Multiplier float64
	// Jitter fraction in [0, 1]; 0 is none.
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
	// Backoff between reconnect attempts. Required.
	Backoff Backoff
	// ConnectTimeout bounds connecting to one origin. Required (> 0).
	ConnectTimeout time.Duration
	// FailbackInterval: while a link is served by an origin other than
	// its authority's first, the first is probed this often, and the
	// link moves back to it once it accepts a connection. Required (> 0).
	FailbackInterval time.Duration
	// ResponseTimeout bounds the wait for an origin's first response on a
	// stream the relay asked something on; past it the attempt fails and
	// the link moves to the next origin (config upstream.response_timeout).
	// Required (> 0).
	ResponseTimeout time.Duration
	// IdleTimeout: a link whose keys no client watches for this long (to
	// twice that) is closed, its connection given back and what it cached
	// forgotten (config upstream.idle_timeout). Required (> 0).
	IdleTimeout time.Duration
	// MaxRequestSize: a delta subscription request whose encoding would
	// be larger is split into several (config upstream.max_request_size).
	// Required (> 0).
	MaxRequestSize int
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

// validate reports every option New cannot run with. The numbers have no
// defaults here: config has them, and the relay passes its config.
func (o Options) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: "+format, append([]any{ErrBadOptions, field}, args...)...))
	}
	if o.Cache == nil {
		errs = append(errs, ErrNoCache)
	}
	b := o.Backoff
	if b.Initial <= 0 {
		bad("Backoff.Initial", "must be positive, got %v", b.Initial)
	}
	if b.Max <= 0 || b.Max < b.Initial {
		bad("Backoff.Max", "must be positive and at least Backoff.Initial (%v), got %v", b.Initial, b.Max)
	}
	if !(b.Multiplier >= 1) || math.IsInf(b.Multiplier, 0) {
		bad("Backoff.Multiplier", "must be a finite number >= 1, got %v", b.Multiplier)
	}
	if !(b.Jitter >= 0 && b.Jitter <= 1) {
		bad("Backoff.Jitter", "must be between 0 and 1, got %v", b.Jitter)
	}
	if o.ConnectTimeout <= 0 {
		bad("ConnectTimeout", "must be positive, got %v", o.ConnectTimeout)
	}
	if o.FailbackInterval <= 0 {
		bad("FailbackInterval", "must be positive, got %v", o.FailbackInterval)
	}
	if o.ResponseTimeout <= 0 {
		bad("ResponseTimeout", "must be positive, got %v", o.ResponseTimeout)
	}
	if o.IdleTimeout <= 0 {
		bad("IdleTimeout", "must be positive, got %v", o.IdleTimeout)
	}
	if o.MaxRequestSize <= 0 {
		bad("MaxRequestSize", "must be positive, got %d", o.MaxRequestSize)
	}
	for i, a := range o.Authorities {
		if a.Credentials != nil && !reflect.TypeOf(a.Credentials).Comparable() {
			bad(fmt.Sprintf("Authorities[%d].Credentials", i), "%T cannot key a shared connection; pass a pointer", a.Credentials)
		}
	}
	return errors.Join(errs...)
}
