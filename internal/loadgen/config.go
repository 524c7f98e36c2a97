package loadgen

import (
	"errors"
	"fmt"
	"net"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/xds-relay/xds-relay/internal/xdstype"
	"go.uber.org/zap"
)

// Variant is the xDS protocol variant the clients speak.
type Variant = xdstype.Variant

const (
	// Delta is the incremental protocol (DeltaAggregatedResources).
	Delta = xdstype.Delta
	// SotW is the state-of-the-world protocol (StreamAggregatedResources).
	SotW = xdstype.SotW
)

// Config describes a fleet.
type Config struct {
	// Target is the xDS server's host:port. Required.
	Target string
	// Clients is the number of simulated clients (one ADS stream each).
	// Required, at least 1.
	Clients int
	// Conns is the number of gRPC connections the clients are spread over.
	// Default: one per 100 clients, at least 1; never more than Clients.
	Conns int
	// Variant is Delta or SotW. Default: Delta.
	Variant Variant
	// TypeURL is the resource type subscribed to. A full type URL, or one of
	// the short forms eds, cds, lds, rds, sds. Default: ClusterLoadAssignment.
	TypeURL string
	// Names are the resources every client subscribes to (or, with
	// Window, the ring of names the clients' windows are cut from). "*"
	// among them is the wildcard: every resource of the type. At most one
	// of Names and Glob is set; with neither, a client of lds or cds
	// subscribes to the wildcard as Envoy does (no names), and other types
	// need one of them.
	Names []string
	// Window, when not 0, gives each client its own subscription, as
	// Envoys of different services each want their own clusters: client i
	// subscribes to the Window names starting at Names[i*Stride], wrapping
	// around the end of Names, so neighbouring clients' windows overlap.
	// Default 0: every client subscribes to all of Names. At most
	// len(Names); needs Names.
	Window int
	// Stride is how far apart two consecutive clients' windows start.
	// Default: len(Names)/Clients, at least 1, so the windows cover every
	// name. Only with Window.
	Stride int
	// Glob is an xdstp glob collection URL every client subscribes to.
	Glob string
	// NackFraction is the fraction of responses NACKed, in [0, 1]. Default 0.
	NackFraction float64
	// Envoy makes every client subscribe as an Envoy bootstraps over ADS:
	// the wildcard of LDS and of CDS, then RDS for the route
	// configurations its listeners name and EDS for its clusters of type
	// EDS, following every change. TypeURL, Names, Glob and Window must be
	// unset. Default false.
	Envoy bool
	// NodeIDPrefix makes client i's Node.id "<NodeIDPrefix>-<i>". Default:
	// "loadgen-" and 6 random hex digits drawn by New, so the clients of two
	// load generators against one server never share a node id.
	NodeIDPrefix string
	// NodeCluster is the Node.cluster every client presents. Default
	// "loadgen".
	NodeCluster string
	// NodeClusters, when more than 1, spreads the clients over that many
	// node clusters, as Envoys of different services: client i presents
	// "<NodeCluster>-<i mod NodeClusters>". A relay that groups plain
	// names by node cluster then keeps one upstream stream per cluster.
	// Default 1: every client presents NodeCluster.
	NodeClusters int
	// StallEvery, when not 0, makes every StallEvery-th client (0,
	// StallEvery, 2×StallEvery, …) one that Fleet.Stall stops reading
	// (stall.go): 100 is 1% of the fleet. Those clients share connections
	// of their own with the smallest HTTP/2 windows (64 KiB, no BDP
	// growth), so a server's sends to them wait once 64 KiB is unread.
	// Default 0: none.
	StallEvery int
	// Logger receives stream errors at Debug. Default: no logging.
	Logger *zap.Logger
}

var typeAliases = map[string]string{
	"eds": resourcev3.EndpointType,
	"cds": resourcev3.ClusterType,
	"lds": resourcev3.ListenerType,
	"rds": resourcev3.RouteType,
	"sds": resourcev3.SecretType,
}

// shortType is a type URL's short form (eds, cds, lds, rds, sds), else
// the type URL.
func shortType(typeURL string) string {
	for short, full := range typeAliases {
		if full == typeURL {
			return short
		}
	}
	return typeURL
}

// withDefaults returns c with defaults applied.
func (c Config) withDefaults() Config {
	if c.Conns == 0 {
		c.Conns = max(1, (c.Clients+99)/100)
	}
	if c.Conns > c.Clients && c.Clients > 0 {
		c.Conns = c.Clients
	}
	if c.Variant == "" {
		c.Variant = Delta
	}
	if c.TypeURL == "" && !c.Envoy {
		c.TypeURL = resourcev3.EndpointType
	}
	if full, ok := typeAliases[strings.ToLower(c.TypeURL)]; ok {
		c.TypeURL = full
	}
	if c.Window > 0 && c.Stride == 0 && c.Clients > 0 {
		c.Stride = max(1, len(c.Names)/c.Clients)
	}
	if c.NodeCluster == "" {
		c.NodeCluster = "loadgen"
	}
	if c.NodeClusters == 0 {
		c.NodeClusters = 1
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate returns every problem of c (after defaults), each wrapping ErrConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Target); err != nil {
		bad("target", "%q is not host:port", c.Target)
	}
	if c.Clients < 1 {
		bad("clients", "%d: need at least 1", c.Clients)
	}
	if c.Conns < 1 {
		bad("conns", "%d: need at least 1", c.Conns)
	}
	if c.Variant != Delta && c.Variant != SotW {
		bad("variant", "%q: want delta or sotw", c.Variant)
	}
	if c.Envoy {
		c.validateEnvoy(bad)
	} else {
		c.validateSubscription(bad)
	}
	for i, n := range c.Names {
		if n == "" {
			bad(fmt.Sprintf("names[%d]", i), "empty name")
		}
	}
	if c.Glob != "" && !strings.HasSuffix(strings.SplitN(c.Glob, "?", 2)[0], "/*") {
		bad("glob", "%q does not end in /*", c.Glob)
	}
	switch {
	case c.Window < 0:
		bad("window", "%d: want 0 (every name) or more", c.Window)
	case c.Window > 0 && c.Glob != "":
		bad("window", "a window is cut from names, not a glob")
	case c.Window > 0 && len(c.Names) == 0 && !c.Envoy:
		bad("window", "a window is cut from names: set names")
	case c.Window > len(c.Names) && len(c.Names) > 0:
		bad("window", "%d: more than the %d names", c.Window, len(c.Names))
	case c.Window == 0 && c.Stride != 0:
		bad("stride", "%d: only with a window", c.Stride)
	case c.Window > 0 && c.Stride < 1:
		bad("stride", "%d: want at least 1", c.Stride)
	}
	if c.NodeClusters < 1 {
		bad("node-clusters", "%d: want at least 1", c.NodeClusters)
	}
	if c.StallEvery < 0 {
		bad("stall-every", "%d: want 0 (none) or more", c.StallEvery)
	}
	if c.NackFraction < 0 || c.NackFraction > 1 {
		bad("nack-fraction", "%v: want a value in [0, 1]", c.NackFraction)
	}
	return errors.Join(errs...)
}

// validateSubscription checks the type and what a client of it
// subscribes to.
func (c Config) validateSubscription(bad func(field, format string, args ...any)) {
	if !strings.Contains(c.TypeURL, "/") {
		bad("type", "%q: want a type URL or one of eds, cds, lds, rds, sds", c.TypeURL)
	}
	switch {
	case len(c.Names) == 0 && c.Glob == "" && !wildcardType(c.TypeURL):
		bad("names", "set names or glob (only lds and cds have a wildcard without names; --names '*' asks for it explicitly)")
	case len(c.Names) > 0 && c.Glob != "":
		bad("names", "set names or glob, not both")
	}
}

// validateEnvoy checks an Envoy fleet: what its clients subscribe to
// follows from what they receive, so nothing else says it.
func (c Config) validateEnvoy(bad func(field, format string, args ...any)) {
	for _, f := range []struct {
		field string
		set   bool
	}{{"type", c.TypeURL != ""}, {"names", len(c.Names) > 0}, {"glob", c.Glob != ""}, {"window", c.Window != 0}} {
		if f.set {
			bad(f.field, "an Envoy fleet subscribes to the wildcard of LDS and CDS, then to what they name: no %s", f.field)
		}
	}
}

// wildcardType reports whether a client of typeURL asking for no name
// asks for every resource (the legacy wildcard of LDS and CDS).
func wildcardType(typeURL string) bool {
	return typeURL == resourcev3.ListenerType || typeURL == resourcev3.ClusterType
}

// subscription is what the clients subscribe to: the glob, or every name
// some client's subscription has.
func (c Config) subscription() []string {
	if c.Glob != "" {
		return []string{c.Glob}
	}
	return c.Names
}

// nodeCluster is the Node.cluster client i presents.
func (c Config) nodeCluster(i int) string {
	if c.NodeClusters <= 1 {
		return c.NodeCluster
	}
	return fmt.Sprintf("%s-%d", c.NodeCluster, i%c.NodeClusters)
}

// ClientSubscription returns what client i (from 0) subscribes to, after
// defaults: its window of Names, or the whole subscription without one.
// The caller must not modify the result.
func (c Config) ClientSubscription(i int) []string {
	c = c.withDefaults()
	if c.Window == 0 || len(c.Names) == 0 {
		return c.subscription()
	}
	out := make([]string, c.Window)
	start := i * c.Stride
	for j := range out {
		out[j] = c.Names[(start+j)%len(c.Names)]
	}
	return out
}
