package integration

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TTL and heartbeats pass through the relay: a delta client gets the TTL
// on the resource and a heartbeat (name, version, TTL, no body); a SotW
// client gets both in the envoy.service.discovery.v3.Resource wrapper.
func TestDownstreamTTLAndHeartbeat(t *testing.T) {
	o := newScriptedOrigin(t)
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())
	name := dsCluster("ttl")
	body := mustAny(t, cluster(name, 1))

	d := openDelta(t, conn)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{name}})
	o.next("subscription to "+name, subscribes(resource.ClusterType, name))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1",
		Resources: []*discoveryv3.Resource{{Name: name, Version: "1", Resource: body, Ttl: durationpb.New(time.Hour)}}})
	o.next("ACK of n1", answers("n1"))
	got := d.Recv()
	// The relay's version is its own, from the bytes: the origin's "1" stays upstream.
	v := cache.ContentVersion(body)
	want := []*discoveryv3.Resource{{Name: name, Version: v, Resource: body, Ttl: durationpb.New(time.Hour)}}
	if diff := cmp.Diff(want, got.GetResources(), protocmp.Transform()); diff != "" {
		t.Fatalf("delta resource with TTL (-want +got):\n%s", diff)
	}
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})

	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{name}})
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
