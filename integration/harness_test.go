package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/relaytest"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// This file is the relay-and-origin harness, the one every suite of this
// package starts its parts with:
//   - the origin: gcpOrigin, a real go-control-plane server on loopback
//     (newGCPOrigin, newSnapshotOrigin, newClusterSnapshotOrigin), which
//     records what it receives and sends;
//   - the relay: the process's own wiring (relaytest.Run, which runs
//     internal/relay's New and Start as cmd/xds-relay does) on a config:
//     startRelay (one authority, for the downstream suites' clients),
//     newRelay (the upstream suites: the relay's cache watched directly),
//     runRelay (any config);
//   - watcher, the upstream suites' stand-in for a downstream session.
// Clients of the relay are in downstream_clients_test.go.

// errNotYet is a wait's condition not holding yet, where the condition has
// nothing more to say.
var errNotYet = errors.New("not yet")

// gcpOrigin is a real go-control-plane origin on loopback: its server over
// one LinearCache per type in a MuxCache (newGCPOrigin) or over a
// SnapshotCache (newSnapshotOrigin: one snapshot for every node;
// newClusterSnapshotOrigin: one per node cluster), with callbacks that
// record what it receives and sends.
type gcpOrigin struct {
	t      testing.TB
	addr   string
	caches map[string]*cachev3.LinearCache // by type URL; nil for a snapshot origin; read-only
	snaps  cachev3.SnapshotCache           // nil unless a snapshot origin; read-only
	xds    cachev3.Cache                   // what the server answers from; read-only
	// serverOpts, when set, gives the gRPC server options of each start
	// (TLS, interceptors: upstream_tls_test.go); read-only.
	serverOpts func() []grpc.ServerOption
	// countOnly: count streams, keep no message (a soak's memory must be
	// the relay's, not this record's); read-only once serving.
	countOnly bool
	// perType: serve the per-type services (CDS, EDS, LDS, RDS) instead of
	// ADS, as an origin without ADS does; read-only once serving.
	perType bool

	mu         sync.Mutex
	stopServer func()                                // nil while stopped; guarded by mu
	cancel     context.CancelFunc                    // of the xDS server; guarded by mu
	deltaOpens int                                   // guarded by mu
	deltaPeers map[string]int                        // guarded by mu; delta streams opened per client address
	sotwOpens  int                                   // guarded by mu
	deltaReqs  []*discoveryv3.DeltaDiscoveryRequest  // guarded by mu
	deltaResps []*discoveryv3.DeltaDiscoveryResponse // guarded by mu
	sotwReqs   []*discoveryv3.DiscoveryRequest       // guarded by mu
	sotwResps  []*discoveryv3.DiscoveryResponse      // guarded by mu
	typeOpens  []string                              // guarded by mu; the type of each per-type stream opened
	firstNodes map[int64]*corev3.Node                // guarded by mu; stream id → its first request's node
	nackTimes  []time.Time                           // guarded by mu; when each request carrying an error_detail arrived
	poke       chan struct{}                         // 1 slot: something was recorded
}

func newGCPOrigin(t testing.TB) *gcpOrigin {
	t.Helper()
	return newGCPOriginWith(t, nil)
}

// newGCPOriginWith is newGCPOrigin whose gRPC server, at each start, gets
// the options serverOpts returns (nil: none).
func newGCPOriginWith(t testing.TB, serverOpts func() []grpc.ServerOption) *gcpOrigin {
	t.Helper()
	o := linearOrigin()
	o.serverOpts = serverOpts
	return serveOrigin(t, o, nil)
}

// linearOrigin is a gcpOrigin over one LinearCache per type (none given:
// clusters, listeners, endpoints and routes), not serving yet.
func linearOrigin(types ...string) *gcpOrigin {
	if len(types) == 0 {
		types = []string{resource.ClusterType, resource.ListenerType, resource.EndpointType, resource.RouteType}
	}
	o := &gcpOrigin{caches: make(map[string]*cachev3.LinearCache)}
	for _, typ := range types {
		o.caches[typ] = cachev3.NewLinearCache(typ)
	}
	caches := make(map[string]cachev3.Cache, len(o.caches))
	for k, v := range o.caches {
		caches[k] = v
	}
	o.xds = &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        caches,
	}
	return o
}

// newSnapshotOrigin is a gcpOrigin over an ADS SnapshotCache that answers
// every node from one snapshot (setSnapshot), as an origin whose SotW
// version_info is a snapshot version does.
func newSnapshotOrigin(t testing.TB) *gcpOrigin {
	t.Helper()
	snaps := cachev3.NewSnapshotCache(true, oneSnapshot{}, nil)
	return serveOrigin(t, &gcpOrigin{snaps: snaps, xds: snaps}, nil)
}

// oneSnapshot maps every node to the snapshot of snapshotKey.
type oneSnapshot struct{}

const snapshotKey = "all"

func (oneSnapshot) ID(*corev3.Node) string { return snapshotKey }

// newClusterSnapshotOrigin is a gcpOrigin over a SnapshotCache (not ADS:
// each type answered on its own) with one snapshot per node cluster
// (setSnapshotOf), as real origins answer legacy requests by the client's
// Node.
func newClusterSnapshotOrigin(t testing.TB) *gcpOrigin {
	t.Helper()
	snaps := cachev3.NewSnapshotCache(false, clusterHash{}, nil)
	return serveOrigin(t, &gcpOrigin{snaps: snaps, xds: snaps}, nil)
}

// clusterHash maps a node to the snapshot of its cluster.
type clusterHash struct{}

func (clusterHash) ID(n *corev3.Node) string { return n.GetCluster() }

// serveOrigin starts o (its caches set) on lis, or on loopback when lis is
// nil, until the test ends.
func serveOrigin(t testing.TB, o *gcpOrigin, lis net.Listener) *gcpOrigin {
	t.Helper()
	o.t, o.poke = t, make(chan struct{}, 1)
	if lis == nil {
		o.start("127.0.0.1:0")
	} else {
		o.serve(lis)
	}
	t.Cleanup(o.stop)
	return o
}

// start serves on addr ("127.0.0.1:0" the first time, the same address on
// restart).
func (o *gcpOrigin) start(addr string) {
	o.t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		o.t.Fatalf("origin listen %s: %v", addr, err)
	}
	o.serve(lis)
}

// serve serves on lis until stop.
func (o *gcpOrigin) serve(lis net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	cb := serverv3.CallbackFuncs{
		DeltaStreamOpenFunc: func(ctx context.Context, _ int64, typeURL string) error {
			o.recordTypeOpen(typeURL)
			addr := ""
			if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
				addr = p.Addr.String()
			}
			o.record(func() {
				o.deltaOpens++
				if o.deltaPeers == nil {
					o.deltaPeers = make(map[string]int)
				}
				o.deltaPeers[addr]++
			})
			return nil
		},
		StreamOpenFunc: func(_ context.Context, _ int64, typeURL string) error {
			o.recordTypeOpen(typeURL)
			o.record(func() { o.sotwOpens++ })
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, r *discoveryv3.DeltaDiscoveryRequest) error {
			if o.countOnly {
				return nil
			}
			o.recordFirstNode(id, r.GetNode())
			c := proto.Clone(r).(*discoveryv3.DeltaDiscoveryRequest)
			o.record(func() { o.deltaReqs = append(o.deltaReqs, c); o.noteNackLocked(c.GetErrorDetail() != nil) })
			return nil
		},
		StreamDeltaResponseFunc: func(_ int64, _ *discoveryv3.DeltaDiscoveryRequest, r *discoveryv3.DeltaDiscoveryResponse) {
			if o.countOnly {
				return
			}
			c := proto.Clone(r).(*discoveryv3.DeltaDiscoveryResponse)
			o.record(func() { o.deltaResps = append(o.deltaResps, c) })
		},
		StreamRequestFunc: func(id int64, r *discoveryv3.DiscoveryRequest) error {
			if o.countOnly {
				return nil
			}
			o.recordFirstNode(id, r.GetNode())
			c := proto.Clone(r).(*discoveryv3.DiscoveryRequest)
			o.record(func() { o.sotwReqs = append(o.sotwReqs, c); o.noteNackLocked(c.GetErrorDetail() != nil) })
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			if o.countOnly {
				return
			}
			c := proto.Clone(r).(*discoveryv3.DiscoveryResponse)
			o.record(func() { o.sotwResps = append(o.sotwResps, c) })
		},
	}
	xs := serverv3.NewServer(ctx, o.xds, cb)
	var opts []grpc.ServerOption
	if o.serverOpts != nil {
		opts = o.serverOpts()
	}
	gs := grpc.NewServer(opts...)
	if o.perType {
		clusterservice.RegisterClusterDiscoveryServiceServer(gs, xs)
		endpointservice.RegisterEndpointDiscoveryServiceServer(gs, xs)
		listenerservice.RegisterListenerDiscoveryServiceServer(gs, xs)
		routeservice.RegisterRouteDiscoveryServiceServer(gs, xs)
	} else {
		discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, xs)
	}
	stopServer := serveGRPC(gs, lis)
	o.mu.Lock()
	o.addr, o.stopServer, o.cancel = lis.Addr().String(), stopServer, cancel
	o.mu.Unlock()
}

// noteNackLocked records when a NACK (a request with error_detail)
// arrived.
func (o *gcpOrigin) noteNackLocked(nack bool) {
	if nack {
		o.nackTimes = append(o.nackTimes, time.Now())
	}
}

// firstNackAfter is when the first NACK after t arrived (zero: none).
func (o *gcpOrigin) firstNackAfter(t time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, at := range o.nackTimes {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// recordTypeOpen records the type of a per-type stream (ADS streams have
// none).
func (o *gcpOrigin) recordTypeOpen(typeURL string) {
	if typeURL != resource.AnyType {
		o.record(func() { o.typeOpens = append(o.typeOpens, typeURL) })
	}
}

// recordFirstNode records the node of stream id's first request.
func (o *gcpOrigin) recordFirstNode(id int64, n *corev3.Node) {
	o.record(func() {
		if o.firstNodes == nil {
			o.firstNodes = make(map[int64]*corev3.Node)
		}
		if _, ok := o.firstNodes[id]; !ok {
			o.firstNodes[id] = n
		}
	})
}

// serveGRPC serves gs on lis in a goroutine it owns; the returned stop
// stops gs and waits for that goroutine.
func serveGRPC(gs *grpc.Server, lis net.Listener) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	return func() {
		gs.Stop()
		<-done
	}
}

// stop stops the origin (idempotent); cached state in its LinearCaches stays.
func (o *gcpOrigin) stop() {
	o.mu.Lock()
	stopServer, cancel := o.stopServer, o.cancel
	o.stopServer = nil
	o.mu.Unlock()
	if stopServer == nil {
		return
	}
	stopServer()
	cancel()
}

func (o *gcpOrigin) restart() { o.start(o.addr) }

func (o *gcpOrigin) record(f func()) {
	o.mu.Lock()
	f()
	o.mu.Unlock()
	select {
	case o.poke <- struct{}{}:
	default:
	}
}

// waitFor waits until cond (evaluated under the origin's lock) holds.
func (o *gcpOrigin) waitFor(what string, cond func() bool) {
	o.t.Helper()
	xdstest.Await(o.t, "origin: "+what, o.poke, func() error {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !cond() {
			return errNotYet
		}
		return nil
	})
}

// linear is the LinearCache of typeURL (not on a snapshot origin).
func (o *gcpOrigin) linear(typeURL string) *cachev3.LinearCache {
	o.t.Helper()
	c := o.caches[typeURL]
	if c == nil {
		o.t.Fatalf("origin has no LinearCache of %s", typeURL)
	}
	return c
}

func (o *gcpOrigin) set(typeURL, name string, r types.Resource) {
	o.t.Helper()
	if err := o.linear(typeURL).UpdateResource(name, r); err != nil {
		o.t.Fatalf("origin update %s: %v", name, err)
	}
}

// setAll updates every resource of rs (name → body) in one origin change:
// one response per stream.
func (o *gcpOrigin) setAll(typeURL string, rs map[string]types.Resource) {
	o.t.Helper()
	if err := o.linear(typeURL).UpdateResources(rs, nil); err != nil {
		o.t.Fatalf("origin update %d resources: %v", len(rs), err)
	}
}

func (o *gcpOrigin) del(typeURL, name string) {
	o.t.Helper()
	if err := o.linear(typeURL).DeleteResource(name); err != nil {
		o.t.Fatalf("origin delete %s: %v", name, err)
	}
}

// setSnapshot makes a snapshot origin answer every node with rs under
// snapshot version.
func (o *gcpOrigin) setSnapshot(version string, rs map[resource.Type][]types.Resource) {
	o.t.Helper()
	o.setSnapshotOf(snapshotKey, version, rs)
}

// setSnapshotOf sets the snapshot of key (newClusterSnapshotOrigin: a node
// cluster) to rs under version.
func (o *gcpOrigin) setSnapshotOf(key, version string, rs map[resource.Type][]types.Resource) {
	o.t.Helper()
	if o.snaps == nil {
		o.t.Fatal("setSnapshot on an origin without a SnapshotCache")
	}
	snap, err := cachev3.NewSnapshot(version, rs)
	if err != nil {
		o.t.Fatal(err)
	}
	if err := o.snaps.SetSnapshot(context.Background(), key, snap); err != nil {
		o.t.Fatal(err)
	}
}

func cluster(name string, timeoutSec int64) *clusterv3.Cluster {
	c := &clusterv3.Cluster{Name: name}
	if timeoutSec > 0 {
		c.ConnectTimeout = &durationpb.Duration{Seconds: timeoutSec}
	}
	return c
}

func listener(name string) *listenerv3.Listener { return &listenerv3.Listener{Name: name} }

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The relay: every suite runs the relay process through the wiring
// cmd/xds-relay runs (relaytest.Run: relay.New, then Start), on the
// harness's config (relayConfig) or, for a test of the config itself, on
// its own (runRelay).

// dsAuthority is the authority the downstream tests serve.
const dsAuthority = "ds.example"

// relayConfig is the harness's config, with auths as its authorities:
// loopback ports, debug logs, quick reconnects (backoff 20 ms to 200 ms),
// a short shutdown and no drain delay (tests that drain set their own).
func relayConfig(auths ...config.Authority) *config.Config {
	cfg := config.Default()
	cfg.Log.Level = config.LogDebug
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Authorities = auths
	cfg.ApplyAuthorityDefaults() // as Load does
	cfg.Upstream.Backoff.Initial, cfg.Upstream.Backoff.Max = 20*time.Millisecond, 200*time.Millisecond
	cfg.ShutdownGracePeriod = time.Second
	cfg.Downstream.DrainDelay = 0
	return cfg
}

// startRelay runs the relay process (runRelay) on relayConfig with one
// authority, dsAuthority, served by origins: what the downstream suites
// connect their clients to. edit (nil: none) adjusts the config. The
// relay logs to the test at cfg.Log.Level, debug unless edit says
// otherwise.
func startRelay(t testing.TB, edit func(*config.Config), origins ...string) *relayproc.Relay {
	t.Helper()
	cfg := relayConfig(config.Authority{Name: dsAuthority, Origins: origins, Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated})
	if edit != nil {
		edit(cfg)
	}
	return runRelay(t, cfg)
}

// runRelay runs the relay process on cfg, validated first, logging to the
// test at cfg.Log.Level, until the test ends.
func runRelay(t testing.TB, cfg *config.Config) *relayproc.Relay {
	t.Helper()
	return runRelayLogging(t, cfg, nil)
}

// runRelayLogging is runRelay logging to lg (nil: to the test).
func runRelayLogging(t testing.TB, cfg *config.Config, lg *zap.Logger) *relayproc.Relay {
	t.Helper()
	reg := prometheus.NewRegistry()
	r := relaytest.Run(t, cfg, lg, reg)
	relayRegistries.Store(r, reg)
	t.Cleanup(func() { relayRegistries.Delete(r) }) // after Close (cleanups run last first)
	return r
}

// relayRegistries holds the metrics registry of each relay runRelay runs.
var relayRegistries sync.Map // *relayproc.Relay → *prometheus.Registry

// relayRegistry is the metrics registry of r, a relay runRelay runs.
func relayRegistry(t testing.TB, r *relayproc.Relay) *prometheus.Registry {
	t.Helper()
	reg, ok := relayRegistries.Load(r)
	if !ok {
		t.Fatal("not a relay of runRelay")
	}
	return reg.(*prometheus.Registry)
}

// relayMetric reads one counter or gauge (for a histogram: its sample
// count) of a relay runRelay runs; labels are name, value pairs. Absent: 0.
func relayMetric(t testing.TB, r *relayproc.Relay, name string, labels ...string) float64 {
	t.Helper()
	return gathered(t, relayRegistry(t, r), name, labels...)
}

// waitRelayMetric waits until the relay's metric satisfies cond (re-read
// by xdstest.Poll) and returns its value.
func waitRelayMetric(t testing.TB, r *relayproc.Relay, what string, cond func(float64) bool, name string, labels ...string) float64 {
	t.Helper()
	var v float64
	xdstest.Poll(t, what, func() error {
		if v = relayMetric(t, r, name, labels...); !cond(v) {
			return fmt.Errorf("%s = %v", name, v)
		}
		return nil
	})
	return v
}

// relay is a relay the process wiring runs, as the upstream suites see
// it: its cache (relayproc.Relay.Cache, for tests only), which they watch
// and read directly in place of a downstream client, and its metrics.
type relay struct {
	*relayproc.Relay
	c *cache.Cache
}

// newRelay runs the relay process (runRelay) on relayConfig with auths as
// its authorities; edit (nil: none) adjusts the config, e.g. the cache's
// bounds (cache.max_resources) or upstream.failback_interval.
func newRelay(t testing.TB, edit func(*config.Config), auths ...config.Authority) *relay {
	t.Helper()
	cfg := relayConfig(auths...)
	if edit != nil {
		edit(cfg)
	}
	p := runRelay(t, cfg)
	return &relay{Relay: p, c: p.Cache()}
}

// watcher stands in for a downstream session: it records what it is
// notified of and pokes a channel.
type watcher struct {
	mu   sync.Mutex
	got  map[string]int // guarded by mu
	poke chan struct{}
}

func newWatcher() *watcher {
	return &watcher{got: make(map[string]int), poke: make(chan struct{}, 1)}
}

func (w *watcher) Notify(k cache.Key) {
	w.mu.Lock()
	w.got[k.Name]++
	w.mu.Unlock()
}

func (w *watcher) Flush(*cache.ChangeSet) {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

func (w *watcher) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got[name]
}

// waitFor waits until cond holds, re-checking after each notification.
func (w *watcher) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	xdstest.Await(t, "watcher: "+what, w.poke, func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	})
}

// waitState waits until the cache holds k in state want (re-checked after
// each notification of w, which must watch k).
func (w *watcher) waitState(t testing.TB, c *cache.Cache, k cache.Key, want cache.State) *cache.Resource {
	t.Helper()
	var got *cache.Resource
	w.waitFor(t, k.Name+" "+want.String(), func() bool {
		read := c.Lookup(nil, k)
		r, st := read.Res, read.State
		got = r
		return st == want
	})
	return got
}

// metricValue is relayMetric for a relay of newRelay.
func metricValue(t testing.TB, r *relay, name string, labels ...string) float64 {
	t.Helper()
	return relayMetric(t, r.Relay, name, labels...)
}

// gathered is metricValue over any registry.
func gathered(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// waitNotified waits until w was notified of name at least n times.
func (w *watcher) waitNotified(t testing.TB, name string, n int) {
	t.Helper()
	w.waitFor(t, fmt.Sprintf("%d notifications of %s", n, name), func() bool { return w.count(name) >= n })
}

// streams is how many delta and SotW streams the origin has opened.
func (o *gcpOrigin) streams() (delta, sotw int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deltaOpens, o.sotwOpens
}

// sotwRequests is how many SotW requests the origin has received.
func (o *gcpOrigin) sotwRequests() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.sotwReqs)
}

// deltaRequests is how many delta requests the origin has received.
func (o *gcpOrigin) deltaRequests() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.deltaReqs)
}

// waitSotWACK waits until, among the SotW requests after the first from,
// one ACKs version of typeURL for at least names: the relay has taken in
// the origin's answer to them.
func (o *gcpOrigin) waitSotWACK(from int, typeURL, version string, names []string) {
	o.t.Helper()
	o.waitFor(fmt.Sprintf("an ACK of %s version %q for %d names", typeURL, version, len(names)), func() bool {
		for _, q := range o.sotwReqs[from:] {
			if q.GetTypeUrl() != typeURL || q.GetResponseNonce() == "" || q.GetErrorDetail() != nil || q.GetVersionInfo() != version {
				continue
			}
			if covers(q.GetResourceNames(), names) {
				return true
			}
		}
		return false
	})
}

// waitDeltaSubscribed waits until, among the delta requests after the
// first from, those of typeURL have subscribed to every one of names.
func (o *gcpOrigin) waitDeltaSubscribed(from int, typeURL string, names []string) {
	o.t.Helper()
	o.waitFor(fmt.Sprintf("delta subscriptions of %d %s names", len(names), typeURL), func() bool {
		return covers(subscribedNames(o.deltaReqs[from:], typeURL, false), names)
	})
}

// covers reports whether have holds every one of want.
func covers(have, want []string) bool {
	set := make(map[string]struct{}, len(have))
	for _, n := range have {
		set[n] = struct{}{}
	}
	for _, n := range want {
		if _, ok := set[n]; !ok {
			return false
		}
	}
	return true
}
