package downstream

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdsname"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	authority = "a.example"
	ldsType   = resourcev3.ListenerType
	cdsType   = resourcev3.ClusterType
	edsType   = resourcev3.EndpointType
)

// legacyMatcher puts every legacy name in one group of authority "legacy",
// except names starting with "nomatch", and names starting with
// "restricted/", which it gives to authority "restricted.example" (group
// "r"): a name another authority's origin may list in its wildcard.
type legacyMatcher struct{}

func (legacyMatcher) Match(req aggregation.Request) (aggregation.Result, error) {
	if strings.HasPrefix(req.Name, "nomatch") {
		return aggregation.Result{}, aggregation.ErrNoMatch
	}
	if strings.HasPrefix(req.Name, "restricted/") {
		return aggregation.Result{Rule: "restricted", Authority: "restricted.example", Group: "r"}, nil
	}
	return aggregation.Result{Rule: "all", Authority: "legacy", Group: "g1"}, nil
}

var legacyStream = cache.LinkID{Authority: "legacy", Group: "g1"}

type env struct {
	t     testing.TB
	cache *testCache
	srv   *Server
	reg   *prometheus.Registry
	conn  *grpc.ClientConn
	// SotW sync subscriptions (one SotW stream per env uses syncSotW).
	sotwSyncNames []string
	sotwSyncNonce string
}

// testLimits are the config's default limits; a test may lower one in
// its env (e.srv.SetLimits) before it opens any stream.
var testLimits = Limits{
	MaxStreams:        config.DefaultMaxStreams,
	MaxNamesPerStream: config.DefaultMaxNamesPerStream,
	MaxNameLength:     config.DefaultMaxNameLength,
	MaxTypesPerStream: config.DefaultMaxTypesPerStream,
	MaxVersionLength:  config.DefaultMaxVersionLength,

	MaxGroupsPerAuthority: config.DefaultMaxGroupsPerAuthority,
	MaxNewGroupsPerStream: config.DefaultMaxNewGroupsPerStream,
}

// quietLogs: newEnv's servers log nothing (benchmarks, fuzzing).
var quietLogs atomic.Bool

func newEnv(t testing.TB, sendTimeout time.Duration, serverOpts ...grpc.ServerOption) *env {
	t.Helper()
	return newEnvOn(t, newTestCache(t), sendTimeout, serverOpts...)
}

// newEnvOn is newEnv over cache c (newTestCacheLedger: with or without
// the propagation ledger).
func newEnvOn(t testing.TB, c *testCache, sendTimeout time.Duration, serverOpts ...grpc.ServerOption) *env {
	t.Helper()
	e := &env{t: t, cache: c, reg: prometheus.NewRegistry()}
	lg := zaptest.NewLogger(t)
	if _, bench := t.(*testing.B); bench || quietLogs.Load() {
		lg = zap.NewNop()
	}
	srv, err := New(Options{
		Cache:       e.cache,
		Resolver:    NewResolver([]string{authority}, legacyMatcher{}),
		SendTimeout: cmp.Or(sendTimeout, config.DefaultSendTimeout),
		Limits:      testLimits,
		FetchWait:   xdstest.QuietPeriod,
		Logger:      lg,
		Registry:    e.reg,
		// As the relay serves: the fan-out fast path on (shared.go).
		SharedEncoding: true,
		// As the relay serves; the window's own tests fake its timer.
		GatherWindow: config.DefaultGatherWindow,
		Breaker:      c.breaker(),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// As the relay serves: the shared-encoding codec, and Stop waits for
	// handlers so srv.Wait does not race a session starting its writer.
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodecV2(Codec()), grpc.WaitForHandlers(true)}, serverOpts...)...)
	srv.Register(gs)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.conn = conn
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		<-served
		srv.Wait()
	})
	return e
}

func xdstp(typeURL, id string) string {
	return "xdstp://" + authority + "/" + typeURL[len(resourcev3.APITypePrefix):] + "/" + id
}

func key(typeURL, name string) cache.Key {
	if len(name) > 6 && name[:6] == "xdstp:" {
		n, err := xdsname.Parse(name)
		if err != nil {
			panic(err)
		}
		return cache.Key{Link: cache.LinkID{Authority: n.Authority}, TypeURL: typeURL, Name: n.String()}
	}
	return cache.Key{Link: legacyStream, TypeURL: typeURL, Name: name}
}

// body returns a small resource of typeURL named name, as an Any.
// body is a resource whose bytes carry version: the cache versions
// resources by their bytes, so a new version must be new content.
func body(typeURL, name, version string) *anypb.Any {
	var m proto.Message
	switch typeURL {
	case ldsType:
		m = &listenerv3.Listener{Name: name, StatPrefix: version}
	default:
		m = &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{
			{Locality: &corev3.Locality{Zone: version}},
		}}
	}
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	if typeURL != ldsType && typeURL != edsType {
		a.TypeUrl = typeURL // the relay never decodes bodies
	}
	return a
}

func res(typeURL, name, version string) *cache.Resource {
	return &cache.Resource{Name: name, OriginVersion: version, Body: body(typeURL, name, version), Arrived: time.Now()}
}

// put stores a resource under its own name.
func (e *env) put(typeURL, name, version string) *cache.Resource {
	r := res(typeURL, name, version)
	e.cache.set(key(typeURL, name), r)
	return r
}

type (
	deltaStreamC = xdstest.Stream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	sotwStreamC  = xdstest.Stream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
)

// startStream opens a raw client stream with open.
func startStream[Req, Resp any](t testing.TB, open func(ctx context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) *xdstest.Stream[Req, Resp] {
	t.Helper()
	return xdstest.Open(t, open)
}

func (e *env) delta() *deltaStreamC { return xdstest.DeltaADS(e.t, e.conn) }

func (e *env) sotw() *sotwStreamC { return xdstest.SotWADS(e.t, e.conn) }

var testNode = &corev3.Node{Id: "node-1", Cluster: "c1"}

// ttlNode advertises TTL support (features.go), as Envoy does.
var ttlNode = &corev3.Node{Id: "node-ttl", Cluster: "c1", ClientFeatures: []string{xdstype.FeatureResourceTTL}}

// checkNacks asserts the NACK counter and that exactly one client shows
// lastNack for typeURL in /debug/clients.
func checkNacks(t *testing.T, e *env, typeURL string, want float64, lastNack string) {
	t.Helper()
	if got := testutil.ToFloat64(e.srv.m.nacks.WithLabelValues(typeLabel(typeURL))); got != want {
		t.Errorf("xds_relay_downstream_nacks_total{type=%q} = %v, want %v", typeURL, got, want)
	}
	n := 0
	for _, c := range e.srv.Clients() {
		if c.Subscriptions[typeURL].LastNack == lastNack {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d clients show last NACK %q, want 1: %+v", n, lastNack, e.srv.Clients())
	}
}

var syncSeq atomic.Int64

// syncDelta returns once the server has handled every request c sent
// before it: requests are handled in order, and this one is answered.
func (e *env) syncDelta(c *deltaStreamC) {
	e.t.Helper()
	n := xdstp(resourcev3.SecretType, fmt.Sprintf("sync-%d", syncSeq.Add(1)))
	e.put(resourcev3.SecretType, n, "1")
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNamesSubscribe: []string{n}})
	if got := c.Recv(); len(got.GetResources()) != 1 || got.GetResources()[0].GetName() != n {
		e.t.Fatalf("sync: got %v", got)
	}
}

// syncSotW is syncDelta for a SotW stream (a fresh secret type subscription).
func (e *env) syncSotW(c *sotwStreamC) {
	e.t.Helper()
	n := xdstp(resourcev3.SecretType, fmt.Sprintf("sync-%d", syncSeq.Add(1)))
	e.put(resourcev3.SecretType, n, "1")
	e.sotwSyncNames = append(e.sotwSyncNames, n)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.SecretType, ResourceNames: e.sotwSyncNames, ResponseNonce: e.sotwSyncNonce})
	got := c.Recv()
	if got.GetTypeUrl() != resourcev3.SecretType {
		e.t.Fatalf("sync: got %v", got)
	}
	e.sotwSyncNonce = got.GetNonce()
}
