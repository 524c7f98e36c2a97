package integration

import (
	"context"
	"maps"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	ledsv3 "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// lbEndpoint is a LEDS resource: one endpoint at address:80.
func lbEndpoint(address string) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: address, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}},
	}}}
}

// endpointsOf is what a delta client holds of LbEndpoints: name → address.
func endpointsOf(t testing.TB, v deltaView) map[string]string {
	t.Helper()
	out := map[string]string{}
	for n, x := range v {
		var e endpointv3.LbEndpoint
		if err := x.GetResource().UnmarshalTo(&e); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[n] = e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
	}
	return out
}

// TestLEDSGlobCollections: LEDS end to end. A go-control-plane origin
// holds LbEndpoints under xdstp names (it has no glob support: the relay
// emulates the collections over its wildcard); a client of the LEDS
// service (DeltaLocalityEndpoints) and a delta ADS client each subscribe
// to one locality's glob collection and get exactly its members, then
// each change of theirs: an update, an addition and a removal.
func TestLEDSGlobCollections(t *testing.T) {
	o := serveOrigin(t, linearOrigin(xdstype.LbEndpointType), nil)
	prefix := "xdstp://" + dsAuthority + "/envoy.config.endpoint.v3.LbEndpoint/"
	a1, a2, a3, b1 := prefix+"c1/zone-a/e1", prefix+"c1/zone-a/e2", prefix+"c1/zone-a/e3", prefix+"c1/zone-b/e1"
	globA, globB := prefix+"c1/zone-a/*", prefix+"c1/zone-b/*"
	o.setAll(xdstype.LbEndpointType, map[string]types.Resource{
		a1: lbEndpoint("10.0.1.1"), a2: lbEndpoint("10.0.1.2"), b1: lbEndpoint("10.0.2.1")})
	r := startRelay(t, nil, o.addr) // LbEndpoint is carried by default
	conn := dial(t, r.XDSAddr())

	leds := openStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
		return ledsv3.NewLocalityEndpointDiscoveryServiceClient(conn).DeltaLocalityEndpoints(ctx)
	})
	ads := openDelta(t, conn)
	ledsView, adsView := deltaView{}, deltaView{}
	holds := func(v deltaView, want map[string]string) func() bool {
		return func() bool { return maps.Equal(endpointsOf(t, v), want) }
	}
	// The LEDS service's stream has its type fixed: type_url may be left out.
	leds.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, ResourceNamesSubscribe: []string{globA}})
	recvDelta(t, leds, ledsView, holds(ledsView, map[string]string{a1: "10.0.1.1", a2: "10.0.1.2"}))
	ads.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: xdstype.LbEndpointType, ResourceNamesSubscribe: []string{globB}})
	recvDelta(t, ads, adsView, holds(adsView, map[string]string{b1: "10.0.2.1"}))

	// One origin change: zone-a gains e3, e2 moves, e1 goes.
	if err := o.linear(xdstype.LbEndpointType).UpdateResources(map[string]types.Resource{
		a2: lbEndpoint("10.0.1.22"), a3: lbEndpoint("10.0.1.3")}, []string{a1}); err != nil {
		t.Fatal(err)
	}
	recvDelta(t, leds, ledsView, holds(ledsView, map[string]string{a2: "10.0.1.22", a3: "10.0.1.3"}))
	ads.None() // zone-b did not change
	if !proto.Equal(adsView[b1].GetResource(), mustAny(t, lbEndpoint("10.0.2.1"))) {
		t.Errorf("ADS client holds %v of %s", adsView[b1], b1)
	}
	if n := relayMetric(t, r, "xds_relay_downstream_requests_total", "type", "envoy.config.endpoint.v3.LbEndpoint"); n == 0 {
		t.Error("no request counted under the LbEndpoint label")
	}
}
