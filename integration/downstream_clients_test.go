package integration

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// waitUntil re-reads cond every few milliseconds for up to d and reports
// whether it held: for pacing a test's next stimulus, never for the outcome
// it asserts (that waits up to xdstest.WaitTimeout).
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
	return true
}

// waitStreamsGone waits until r holds no client stream of either variant:
// clients that left are gone from the relay, not only from their side.
func waitStreamsGone(t testing.TB, r *relayproc.Relay) {
	t.Helper()
	for _, v := range []string{"delta", "sotw"} {
		waitRelayMetric(t, r, "every "+v+" client stream ended", func(n float64) bool { return n == 0 },
			"xds_relay_downstream_streams", "variant", v)
	}
}

// dial connects a plaintext client to addr.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type (
	deltaADS = xdstest.Stream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	sotwADS  = xdstest.Stream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
)

// openStream opens a raw client stream with open, for tests that speak the
// protocol by hand.
func openStream[Req, Resp any](t testing.TB, open func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) *xdstest.Stream[Req, Resp] {
	t.Helper()
	return xdstest.Open(t, open)
}

func openDelta(t testing.TB, conn *grpc.ClientConn) *deltaADS {
	return xdstest.DeltaADS(t, conn)
}

func openSotW(t testing.TB, conn *grpc.ClientConn) *sotwADS {
	return xdstest.SotWADS(t, conn)
}

// deltaView is what a delta client holds: name → version, and the bodies.
type deltaView map[string]*discoveryv3.Resource

// apply folds a response into the view.
func (v deltaView) apply(r *discoveryv3.DeltaDiscoveryResponse) {
	for _, x := range r.GetResources() {
		v[x.GetName()] = x
	}
	for _, n := range r.GetRemovedResources() {
		delete(v, n)
	}
}

var testNodeDS = &corev3.Node{Id: "ds-node", Cluster: "ds-cluster"}

func grpcCode(err error) codes.Code { return status.Code(err) }

// adsClient is one raw xDS client, delta or SotW ADS, driven from the test
// goroutine: it keeps what it holds per type and ACKs every response (SotW:
// with the response's version_info and nonce and its full name list).
type adsClient struct {
	t     *testing.T
	name  string
	node  *corev3.Node
	delta *deltaADS
	sotw  *sotwADS
	subs  map[string][]string                         // SotW: names subscribed per type
	held  map[string]map[string]*discoveryv3.Resource // per type: name → what the client holds
	acked map[string]string                           // SotW: per type, the version_info last ACKed
}

// received is one response as a client saw it. SotW resources are wrapped
// as delta Resources with the response's version_info as their version.
type received struct {
	typeURL   string
	resources []*discoveryv3.Resource
	removed   []string // delta only
}

// newADSClient opens a client of variant "delta" or "sotw" on conn; md, when
// set, becomes its node's metadata. The test's Cleanup ends its stream.
func newADSClient(t *testing.T, conn *grpc.ClientConn, variant, id, cluster string, md map[string]any) *adsClient {
	t.Helper()
	c, stop := startADSClient(t, conn, variant, id, cluster, md)
	t.Cleanup(stop)
	return c
}

// startADSClient is newADSClient for a client that leaves before the test
// ends: stop ends its stream (idempotent).
func startADSClient(t *testing.T, conn *grpc.ClientConn, variant, id, cluster string, md map[string]any) (*adsClient, func()) {
	t.Helper()
	var stop func()
	c := &adsClient{t: t, name: id, node: &corev3.Node{Id: id, Cluster: cluster}, subs: map[string][]string{},
		held: map[string]map[string]*discoveryv3.Resource{}, acked: map[string]string{}}
	if md != nil {
		s, err := structpb.NewStruct(md)
		if err != nil {
			t.Fatal(err)
		}
		c.node.Metadata = s
	}
	switch variant {
	case "delta":
		c.delta, stop = xdstest.Start(t, xdstest.DeltaOpener(conn))
	case "sotw":
		c.sotw, stop = xdstest.Start(t, xdstest.SotWOpener(conn))
	default:
		t.Fatalf("variant %q", variant)
	}
	return c, stop
}

// subscribe subscribes to names of typeURL (none: the wildcard).
func (c *adsClient) subscribe(typeURL string, names ...string) {
	c.t.Helper()
	if c.delta != nil {
		c.delta.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNamesSubscribe: names})
		return
	}
	c.subs[typeURL] = names
	c.sotw.Send(&discoveryv3.DiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNames: names})
}

// resume is a delta client's first request on a new stream: names of
// typeURL, with the versions it holds as initial_resource_versions.
func (c *adsClient) resume(typeURL string, versions map[string]string, names ...string) {
	c.t.Helper()
	if c.delta == nil {
		c.t.Fatal("resume: not a delta client")
	}
	h := c.heldFor(typeURL)
	for n, v := range versions {
		h[n] = &discoveryv3.Resource{Name: n, Version: v}
	}
	c.delta.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: typeURL, ResourceNamesSubscribe: names, InitialResourceVersions: versions})
}

// isFullState reports whether a SotW response of typeURL lists every
// resource the client holds (LDS, CDS) rather than only some.
func isFullState(typeURL string) bool {
	return typeURL == resource.ClusterType || typeURL == resource.ListenerType
}

// recvOne receives one response, folds it into held and ACKs it. A
// response already buffered is taken even when done is closed; otherwise
// it waits until done is closed and then returns false.
func (c *adsClient) recvOne(done <-chan struct{}) (received, bool) {
	got, _, ok := c.recvAnswer(done, nil)
	return got, ok
}

// recvAnswer is recvOne, except that when reject (nil: never) says why a
// resource of the response cannot be used, the client NACKs the response
// with that error instead (SotW: with the version_info it last ACKed) and
// what it holds does not change; nacked is the error ("" for an ACK).
func (c *adsClient) recvAnswer(done <-chan struct{}, reject func(*discoveryv3.Resource) string) (got received, nacked string, ok bool) {
	c.t.Helper()
	if c.delta != nil {
		r, ok := nextResponse(c.t, c.name, c.delta, done)
		if !ok {
			return received{}, "", false
		}
		got = received{typeURL: r.GetTypeUrl(), resources: r.GetResources(), removed: r.GetRemovedResources()}
		if nacked = rejection(got, reject); nacked != "" {
			c.delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
				ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: nacked}})
			return got, nacked, true
		}
		h := c.heldFor(r.GetTypeUrl())
		for _, x := range r.GetResources() {
			h[x.GetName()] = x
		}
		for _, n := range r.GetRemovedResources() {
			delete(h, n)
		}
		c.delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
		return got, "", true
	}
	r, ok := nextResponse(c.t, c.name, c.sotw, done)
	if !ok {
		return received{}, "", false
	}
	got = received{typeURL: r.GetTypeUrl()}
	for _, a := range r.GetResources() {
		got.resources = append(got.resources, &discoveryv3.Resource{Name: resourceName(c.t, a), Version: r.GetVersionInfo(), Resource: a})
	}
	if nacked = rejection(got, reject); nacked != "" {
		c.sotw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: c.acked[r.GetTypeUrl()], ResponseNonce: r.GetNonce(),
			ResourceNames: c.subs[r.GetTypeUrl()], ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: nacked}})
		return got, nacked, true
	}
	if isFullState(r.GetTypeUrl()) {
		c.held[r.GetTypeUrl()] = map[string]*discoveryv3.Resource{}
	}
	h := c.heldFor(r.GetTypeUrl())
	for _, x := range got.resources {
		h[x.GetName()] = x
	}
	c.sotw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: c.subs[r.GetTypeUrl()]})
	c.acked[r.GetTypeUrl()] = r.GetVersionInfo()
	return got, "", true
}

// rejection is the first reason reject gives for a resource of r ("":
// none, or no reject).
func rejection(r received, reject func(*discoveryv3.Resource) string) string {
	if reject == nil {
		return ""
	}
	for _, x := range r.resources {
		if why := reject(x); why != "" {
			return why
		}
	}
	return ""
}

// nextResponse takes s's next response: a buffered one at once, else the
// first to arrive before done is closed. The stream ending fails the test.
func nextResponse[Req, Resp any](t *testing.T, name string, s *xdstest.Stream[Req, Resp], done <-chan struct{}) (*Resp, bool) {
	t.Helper()
	select {
	case r := <-s.Responses():
		return r, true
	default:
	}
	select {
	case r := <-s.Responses():
		return r, true
	case err := <-s.Errors():
		t.Fatalf("%s: stream ended: %v", name, err)
	case <-done:
	}
	return nil, false
}

func (c *adsClient) heldFor(typeURL string) map[string]*discoveryv3.Resource {
	h := c.held[typeURL]
	if h == nil {
		h = map[string]*discoveryv3.Resource{}
		c.held[typeURL] = h
	}
	return h
}

// names lists the names the client holds of typeURL, sorted.
func (c *adsClient) names(typeURL string) []string {
	out := []string{}
	for n := range c.held[typeURL] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// versions is what the client holds of typeURL: name → version.
func (c *adsClient) versions(typeURL string) map[string]string {
	out := map[string]string{}
	for n, x := range c.held[typeURL] {
		out[n] = x.GetVersion()
	}
	return out
}

// waitHolds receives until the client holds exactly want of typeURL.
func (c *adsClient) waitHolds(typeURL string, want ...string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	c.waitHoldsUntil(ctx.Done(), typeURL, want...)
}

// waitHoldsUntil is waitHolds with the caller's deadline.
func (c *adsClient) waitHoldsUntil(done <-chan struct{}, typeURL string, want ...string) {
	c.t.Helper()
	want = slices.Sorted(slices.Values(want))
	for !cmp.Equal(want, c.names(typeURL)) {
		if _, ok := c.recvOne(done); !ok {
			c.t.Fatalf("%s holds %v of %s after %v, want %v", c.name, c.names(typeURL), typeURL, xdstest.WaitTimeout, want)
		}
	}
}

// quiet asserts the client receives nothing more within xdstest.QuietPeriod.
func (c *adsClient) quiet() {
	c.t.Helper()
	if c.delta != nil {
		c.delta.None()
	} else {
		c.sotw.None()
	}
}

func resourceName(t testing.TB, a *anypb.Any) string {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatalf("resource %s: %v", a.GetTypeUrl(), err)
	}
	return cachev3.GetResourceName(m)
}
