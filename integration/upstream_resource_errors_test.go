package integration

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Resource errors (xRFC TP3) end to end: go-control-plane's server sends
// none, so the origin's are sent by the scripted origin (a real ADS server
// on the generated protos); the relay's own are checked against a
// go-control-plane origin. grpc-go's xDS client (v1.85 in go.mod) does not
// read resource_errors, so only raw clients observe them here.

// clusterLabel is the type label of clusters in the relay's metrics.
const clusterLabel = "envoy.config.cluster.v3.Cluster"

func resErr(name string, code codes.Code, msg string) *discoveryv3.ResourceError {
	return &discoveryv3.ResourceError{ResourceName: &discoveryv3.ResourceName{Name: name},
		ErrorDetail: &statuspb.Status{Code: int32(code), Message: msg}}
}

// checkErrors compares the resource errors of a response.
func checkErrors(t *testing.T, who string, want, got []*discoveryv3.ResourceError) {
	t.Helper()
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Fatalf("%s: resource_errors (-want +got):\n%s", who, d)
	}
}

// relayConn is a relay and a client connection to it.
type relayConn struct {
	r    *relayproc.Relay
	conn *grpc.ClientConn
}

// scriptedRelay runs the relay in front of a scripted origin reached over
// transport (delta or sotw), and its clients' connection.
func scriptedRelay(t *testing.T, transport string) (*scriptedOrigin, *relayConn) {
	t.Helper()
	o := newScriptedOrigin(t)
	r := startRelay(t, func(c *config.Config) { c.Authorities[0].Transport = transport }, o.addr)
	return o, &relayConn{r: r, conn: dial(t, r.XDSAddr())}
}

// originSays makes the scripted origin answer the relay's subscription of
// name (cluster type) with resource_errors only, over transport.
func originSays(t *testing.T, o *scriptedOrigin, transport, name, nonce string, errs ...*discoveryv3.ResourceError) {
	t.Helper()
	if transport == xdstype.TransportDelta {
		o.next("the relay subscribes "+name, subscribes(resource.ClusterType, name))
		o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: nonce, ResourceErrors: errs})
		o.next("the relay ACKs "+nonce, answers(nonce))
		return
	}
	o.nextSotW("the relay asks for "+name, func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetTypeUrl() == resource.ClusterType && len(r.GetResourceNames()) > 0 && r.GetResourceNames()[0] == name
	})
	o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: nonce, Nonce: nonce, ResourceErrors: errs})
	o.nextSotW("the relay ACKs "+nonce, func(r *discoveryv3.DiscoveryRequest) bool { return r.GetResponseNonce() == nonce })
}

// An origin's error reaches delta and SotW clients of the name, under
// their spelling; a client that subscribes afterwards gets it from the
// cache (a cache hit: the origin is not asked again); over both upstream
// transports.
func TestResourceErrorsPassedThrough(t *testing.T) {
	for _, transport := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(transport, func(t *testing.T) {
			o, rc := scriptedRelay(t, transport)
			x := dsCluster("denied")
			d, s := openDelta(t, rc.conn), openSotW(t, rc.conn)
			d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{x}})
			originSays(t, o, transport, x, "1", resErr(x, codes.PermissionDenied, "origin: not yours"))
			want := []*discoveryv3.ResourceError{resErr(x, codes.PermissionDenied, "origin: not yours")}
			dr := d.Recv()
			checkErrors(t, "delta client", want, dr.GetResourceErrors())
			if len(dr.GetResources())+len(dr.GetRemovedResources()) != 0 {
				t.Errorf("delta client: %v, want the error only", dr)
			}

			// Late subscribers: the error is in the cache.
			hits := relayMetric(t, rc.r, "xds_relay_cache_hits_total", "type", clusterLabel)
			s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{x}})
			sr := s.Recv()
			checkErrors(t, "late SotW client", want, sr.GetResourceErrors())
			if len(sr.GetResources()) != 0 {
				t.Errorf("late SotW client: resources %v, want none", sr.GetResources())
			}
			late := openDelta(t, rc.conn)
			late.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{x}})
			checkErrors(t, "late delta client", want, late.Recv().GetResourceErrors())
			if got := relayMetric(t, rc.r, "xds_relay_cache_hits_total", "type", clusterLabel) - hits; got != 2 {
				t.Errorf("cache hits for the late subscribers: %v, want 2", got)
			}
			if got := relayMetric(t, rc.r, "xds_relay_upstream_resource_errors_total", "authority", dsAuthority, "type", clusterLabel, "code", "permission_denied"); got != 1 {
				t.Errorf("upstream resource_errors_total{permission_denied} = %v, want 1", got)
			}
			if got := relayMetric(t, rc.r, "xds_relay_downstream_resource_errors_sent_total", "type", clusterLabel, "code", "permission_denied"); got != 3 {
				t.Errorf("downstream resource_errors_sent_total{permission_denied} = %v, want 3", got)
			}
			d.None() // told once
		})
	}
}

// The origin's NOT_FOUND is an absence: a delta client gets the name in
// removed_resources with the origin's status, a SotW client the status.
func TestResourceErrorsNotFoundIsAbsent(t *testing.T) {
	for _, transport := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(transport, func(t *testing.T) {
			o, rc := scriptedRelay(t, transport)
			x := dsCluster("nowhere-to-be-found")
			d, s := openDelta(t, rc.conn), openSotW(t, rc.conn)
			d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{x}})
			originSays(t, o, transport, x, "1", resErr(x, codes.NotFound, "origin: no such cluster"))
			want := []*discoveryv3.ResourceError{resErr(x, codes.NotFound, "origin: no such cluster")}
			dr := d.Recv()
			checkErrors(t, "delta client", want, dr.GetResourceErrors())
			if d := cmp.Diff([]string{x}, dr.GetRemovedResources()); d != "" {
				t.Errorf("delta removed_resources (-want +got):\n%s", d)
			}
			s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{x}})
			sr := s.Recv()
			checkErrors(t, "SotW client", want, sr.GetResourceErrors())
			if len(sr.GetResources()) != 0 {
				t.Errorf("SotW client: resources %v, want none", sr.GetResources())
			}
		})
	}
}

// Names the relay knows it cannot serve are answered at once with its own
// NOT_FOUND saying why: over SotW (they used to get nothing, and a gRPC
// client waited for its does-not-exist timer), and over delta beside
// removed_resources.
func TestResourceErrorsRelayNotFound(t *testing.T) {
	o := newGCPOrigin(t)
	r := startRelay(t, func(c *config.Config) {
		c.Authorities[0].Types = []string{resource.ClusterType}
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	unknown := "xdstp://nowhere.example/envoy.config.cluster.v3.Cluster/x"
	notCarried := "xdstp://" + dsAuthority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/e"

	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{unknown}})
	checkErrors(t, "SotW, unknown authority", []*discoveryv3.ResourceError{
		resErr(unknown, codes.NotFound, "xds-relay: no configured authority serves this name")}, s.Recv().GetResourceErrors())
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.EndpointType, ResourceNames: []string{notCarried}})
	checkErrors(t, "SotW, type not carried", []*discoveryv3.ResourceError{
		resErr(notCarried, codes.NotFound, "xds-relay: the name's authority does not carry this type")}, s.Recv().GetResourceErrors())

	d := openDelta(t, conn)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{unknown}})
	dr := d.Recv()
	if got := dr.GetRemovedResources(); !cmp.Equal(got, []string{unknown}) {
		t.Errorf("delta, unknown authority: removed %v, want [%s]", got, unknown)
	}
	checkErrors(t, "delta, unknown authority", []*discoveryv3.ResourceError{
		resErr(unknown, codes.NotFound, "xds-relay: no configured authority serves this name")}, dr.GetResourceErrors())
}

// While no origin of the authority answers, clients of a pending name are
// told UNAVAILABLE by the relay, promptly; once the origin answers, the
// resource replaces it.
func TestResourceErrorsUnavailableWhileOriginDown(t *testing.T) {
	o := newGCPOrigin(t)
	x := dsCluster("waits")
	o.set(resource.ClusterType, x, cluster(x, 7))
	o.stop()
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())
	d, s := openDelta(t, conn), openSotW(t, conn)
	start := time.Now()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{x}})
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{x}})
	dr, sr := d.Recv(), s.Recv()
	t.Logf("clients told UNAVAILABLE %v after subscribing (a SotW client's own does-not-exist timer is 15 s)", time.Since(start).Round(time.Millisecond))
	for who, errs := range map[string][]*discoveryv3.ResourceError{"delta": dr.GetResourceErrors(), "SotW": sr.GetResourceErrors()} {
		if len(errs) != 1 || errs[0].GetResourceName().GetName() != x || codes.Code(errs[0].GetErrorDetail().GetCode()) != codes.Unavailable {
			t.Fatalf("%s client: resource_errors %v, want UNAVAILABLE for %s", who, errs, x)
		}
	}
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{x},
		VersionInfo: sr.GetVersionInfo(), ResponseNonce: sr.GetNonce()})
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: dr.GetNonce()})

	o.restart()
	dr = d.Recv()
	if len(dr.GetResources()) != 1 || dr.GetResources()[0].GetName() != x || len(dr.GetResourceErrors()) != 0 {
		t.Fatalf("delta client after the origin answered: %v, want %s alone", dr, x)
	}
	sr = s.Recv()
	if len(sr.GetResources()) != 1 || len(sr.GetResourceErrors()) != 0 {
		t.Fatalf("SotW client after the origin answered: %v, want %s alone", sr, x)
	}
}
