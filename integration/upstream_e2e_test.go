package integration

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// recvResource ACKs responses on d until one carries name, and returns its
// body.
func recvResource(t *testing.T, d *deltaADS, name string) *anypb.Any {
	t.Helper()
	for {
		r := d.Recv()
		d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
		for _, res := range r.GetResources() {
			if res.GetName() == name {
				return res.GetResource()
			}
		}
	}
}

// TestUpstreamEndToEnd: real delta clients → the relay process (config,
// downstream server, cache, upstream) → a go-control-plane origin. Fifty
// clients, each on its own connection, cost the origin one stream and one
// subscription; an update reaches them all; with the origin stopped, a new
// client is still served. (TestUpstreamFanIn is the cache-level twin.)
func TestUpstreamEndToEnd(t *testing.T) {
	o := newGCPOrigin(t)
	name := "xdstp://origin/envoy.config.cluster.v3.Cluster/c1"
	o.set(resource.ClusterType, name, cluster(name, 1))

	rl := startRelay(t, func(cfg *config.Config) {
		cfg.Authorities = []config.Authority{{Name: "origin", Origins: []string{o.addr}, Transport: xdstype.TransportDelta, GlobCollections: config.GlobNative}}
	})
	subscribe := func(nodeID string) *deltaADS { // one connection per client
		d := openDelta(t, dial(t, rl.XDSAddr()))
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: nodeID}, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{name}})
		return d
	}

	want := mustAny(t, cluster(name, 1))
	const n = 50
	clients := make([]*deltaADS, n)
	for i := range clients {
		clients[i] = subscribe("client")
	}
	for i, c := range clients {
		if diff := cmp.Diff(want, recvResource(t, c, name), protocmp.Transform()); diff != "" {
			t.Errorf("client %d (-want +got):\n%s", i, diff)
		}
	}
	o.mu.Lock()
	opens, subs := o.deltaOpens, subscribedNames(o.deltaReqs, resource.ClusterType, false)
	o.mu.Unlock()
	if opens != 1 {
		t.Errorf("origin saw %d streams, want 1", opens)
	}
	if diff := cmp.Diff([]string{name}, subs); diff != "" {
		t.Errorf("origin subscriptions (-want +got):\n%s", diff)
	}

	o.set(resource.ClusterType, name, cluster(name, 2))
	want2 := mustAny(t, cluster(name, 2))
	for i, c := range clients {
		if diff := cmp.Diff(want2, recvResource(t, c, name), protocmp.Transform()); diff != "" {
			t.Errorf("client %d update (-want +got):\n%s", i, diff)
		}
	}

	o.stop()
	late := subscribe("late")
	if diff := cmp.Diff(want2, recvResource(t, late, name), protocmp.Transform()); diff != "" {
		t.Errorf("client after origin stopped (-want +got):\n%s", diff)
	}
}
