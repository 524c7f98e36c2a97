package integration

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// ttlNode is a client that advertises TTL support, as Envoy does.
var ttlNode = &corev3.Node{Id: "ttl-node", Cluster: "ds-cluster", ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning", "xds.config.supports-resource-ttl"}}

// ttlScenario runs a relay before a scripted origin, and a delta client of
// node that subscribes to one cluster, which the origin sends with a TTL of
// an hour; it returns that client's first response.
func ttlScenario(t *testing.T, node *corev3.Node) (o *scriptedOrigin, conn *grpc.ClientConn, name string, body *anypb.Any, d *deltaADS, got *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	o = newScriptedOrigin(t)
	r := startRelay(t, nil, o.addr)
	conn = dial(t, r.XDSAddr())
	name = dsCluster("ttl")
	body = mustAny(t, cluster(name, 1))
	d = openDelta(t, conn)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{name}})
	o.next("subscription to "+name, subscribes(resource.ClusterType, name))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1",
		Resources: []*discoveryv3.Resource{{Name: name, Version: "1", Resource: body, Ttl: durationpb.New(time.Hour)}}})
	o.next("ACK of n1", answers("n1"))
	return o, conn, name, body, d, d.Recv()
}

// TTL and heartbeats pass through the relay to a client that advertises
// xds.config.supports-resource-ttl: a delta client gets the TTL on the
// resource and a heartbeat (name, version, TTL, no body); a SotW client
// gets both in the envoy.service.discovery.v3.Resource wrapper.
func TestDownstreamTTLAndHeartbeat(t *testing.T) {
	o, conn, name, body, d, got := ttlScenario(t, ttlNode)
	// The relay's version is its own, from the bytes: the origin's "1" stays upstream.
	v := cache.ContentVersion(body)
	want := []*discoveryv3.Resource{{Name: name, Version: v, Resource: body, Ttl: durationpb.New(time.Hour)}}
	if diff := cmp.Diff(want, got.GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("delta resource with TTL (-want +got):\n%s", diff)
	}
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})

	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: ttlNode, TypeUrl: resource.ClusterType, ResourceNames: []string{name}})
	sgot := s.Recv()
	wrapped := mustAny(t, &discoveryv3.Resource{Name: name, Version: v, Resource: body, Ttl: durationpb.New(time.Hour)})
	if diff := cmp.Diff([]*anypb.Any{wrapped}, sgot.GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("SotW resource with TTL (-want +got):\n%s", diff)
	}
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: sgot.GetVersionInfo(), ResponseNonce: sgot.GetNonce(), ResourceNames: []string{name}})

	// The origin's heartbeat.
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2",
		Resources: []*discoveryv3.Resource{{Name: name, Version: "1", Ttl: durationpb.New(2 * time.Hour)}}})
	o.next("ACK of n2", answers("n2"))
	hb := []*discoveryv3.Resource{{Name: name, Version: v, Ttl: durationpb.New(2 * time.Hour)}}
	if diff := cmp.Diff(hb, d.Recv().GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("delta heartbeat (-want +got):\n%s", diff)
	}
	// SotW Cluster responses are full state: the heartbeat is the only
	// resource, as a wrapper without body.
	if diff := cmp.Diff([]*anypb.Any{mustAny(t, hb[0])}, s.Recv().GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("SotW heartbeat (-want +got):\n%s", diff)
	}
}

// A client that does not advertise xds.config.supports-resource-ttl (gRPC's
// clients, and the relay's own test node) gets no heartbeat on either
// variant, and SotW resources bare, never in the TTL wrapper, which such a
// client may not unwrap. A real change still reaches it.
func TestDownstreamTTLNotAdvertised(t *testing.T) {
	o, conn, name, body, d, got := ttlScenario(t, testNodeDS)
	if len(got.GetResources()) != 1 || !proto.Equal(got.GetResources()[0].GetResource(), body) {
		t.Fatalf("delta answer: %v", got)
	}
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})

	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{name}})
	sgot := s.Recv()
	if diff := cmp.Diff([]*anypb.Any{body}, sgot.GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("SotW resource with TTL, to a client without the feature (-want +got):\n%s", diff)
	}
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: sgot.GetVersionInfo(), ResponseNonce: sgot.GetNonce(), ResourceNames: []string{name}})

	// The origin's heartbeat reaches neither.
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2",
		Resources: []*discoveryv3.Resource{{Name: name, Version: "1", Ttl: durationpb.New(2 * time.Hour)}}})
	o.next("ACK of n2", answers("n2"))
	d.None()
	s.None()

	// A new body does, bare over SotW.
	body2 := mustAny(t, cluster(name, 2))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n3",
		Resources: []*discoveryv3.Resource{{Name: name, Version: "2", Resource: body2, Ttl: durationpb.New(time.Hour)}}})
	o.next("ACK of n3", answers("n3"))
	if got := d.Recv(); len(got.GetResources()) != 1 || !proto.Equal(got.GetResources()[0].GetResource(), body2) {
		t.Fatalf("delta update: %v", got)
	}
	if diff := cmp.Diff([]*anypb.Any{body2}, s.Recv().GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("SotW update (-want +got):\n%s", diff)
	}
}

// The relay takes TTLs and heartbeats from origins, so it advertises so
// upstream: a relay above it (which follows what clients advertise) keeps
// sending them, and TTLs pass through tiers.
func TestUpstreamAdvertisesTTL(t *testing.T) {
	o := newScriptedOrigin(t)
	r := startRelay(t, nil, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	name := dsCluster("ttl")
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{name}})
	req := o.next("subscription to "+name, subscribes(resource.ClusterType, name))
	if got := req.GetNode().GetClientFeatures(); !slices.Contains(got, "xds.config.supports-resource-ttl") || !slices.Contains(got, "xds.config.resource-in-sotw") {
		t.Fatalf("upstream node advertises %v, want xds.config.supports-resource-ttl and xds.config.resource-in-sotw", got)
	}
}
