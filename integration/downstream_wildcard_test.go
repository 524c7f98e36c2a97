package integration

import (
	"fmt"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
)

// legacyRelay runs the relay with one default aggregation rule: every
// legacy name is served by dsAuthority in group "all".
func legacyRelay(t *testing.T, o *gcpOrigin) string {
	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, `
- name: all
  default: true
  result: {authority: ds.example, group: [{literal: all}]}
`)
	}, o.addr)
	return r.XDSAddr()
}

// timeoutOf is the connect timeout, in seconds, of cluster name in v; -1
// when v does not hold it.
func timeoutOf(v deltaView, name string) int64 {
	c := &clusterv3.Cluster{}
	if v[name] == nil || v[name].GetResource().UnmarshalTo(c) != nil {
		return -1
	}
	return c.GetConnectTimeout().GetSeconds()
}

// syncer proves that the relay handled every request sent before: it
// subscribes a fresh endpoint name (requests are handled in order) and
// waits for it.
type syncer struct {
	o *gcpOrigin
	n int
	// SotW: the endpoint names subscribed so far and the last response.
	names []string
	last  *discoveryv3.DiscoveryResponse
}

func (y *syncer) delta(t *testing.T, s *deltaADS) {
	t.Helper()
	y.n++
	name := fmt.Sprintf("sync-%d", y.n)
	y.o.set(resource.EndpointType, name, &endpointv3.ClusterLoadAssignment{ClusterName: name})
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{name}})
	for {
		r := s.Recv()
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
		if r.GetTypeUrl() == resource.EndpointType && len(r.GetResources()) == 1 && r.GetResources()[0].GetName() == name {
			return
		}
		t.Fatalf("unexpected response while syncing: %v", r)
	}
}

// sotw is delta for a SotW stream: the endpoint subscription grows by one
// fresh name, and only that name is sent back (endpoints are not full state).
func (y *syncer) sotw(t *testing.T, s *sotwADS) {
	t.Helper()
	y.n++
	name := fmt.Sprintf("sync-%d", y.n)
	y.o.set(resource.EndpointType, name, &endpointv3.ClusterLoadAssignment{ClusterName: name})
	y.names = append(y.names, name)
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: y.names,
		VersionInfo: y.last.GetVersionInfo(), ResponseNonce: y.last.GetNonce()})
	r := s.Recv()
	if r.GetTypeUrl() != resource.EndpointType || len(r.GetResources()) != 1 {
		t.Fatalf("unexpected response while syncing: %v", r)
	}
	y.last = r
}

// The spec's incremental example of "How the client specifies what
// resources to return", through the relay to a go-control-plane origin,
// with legacy names grouped by an aggregation rule.
func TestDownstreamDeltaWildcardSpecExample(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "A", cluster("A", 1))
	o.set(resource.ClusterType, "B", cluster("B", 1))
	s := openDelta(t, dial(t, legacyRelay(t, o)))
	y := &syncer{o: o}
	v := deltaView{}

	// 1. subscribe unset: *.
	s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType})
	recvDelta(t, s, v, has(v, "A", "B"))
	// 2. subscribe A: * continues, A is (re)sent.
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"A"}})
	got := s.Recv()
	if len(got.GetResources()) != 1 || got.GetResources()[0].GetName() != "A" {
		t.Fatalf("after subscribing A: %v, want A", got)
	}
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})
	// 3. unsubscribe *: A continues; B (only in the wildcard) does not.
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesUnsubscribe: []string{"*"}})
	y.delta(t, s)
	o.set(resource.ClusterType, "B", cluster("B", 2))
	o.set(resource.ClusterType, "A", cluster("A", 2))
	recvDelta(t, s, v, func() bool { return timeoutOf(v, "A") == 2 })
	if timeoutOf(v, "B") != 1 {
		t.Fatalf("B updated after * was unsubscribed")
	}
	// 4. unsubscribe A: nothing left, and empty is not a wildcard.
	s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesUnsubscribe: []string{"A"}})
	y.delta(t, s)
	o.set(resource.ClusterType, "A", cluster("A", 3))
	o.set(resource.ClusterType, "C", cluster("C", 1))
	s.None()
}

// The spec's SotW example, through the relay (Cluster: full state).
func TestDownstreamSotWWildcardSpecExample(t *testing.T) {
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, "A", cluster("A", 1))
	o.set(resource.ClusterType, "B", cluster("B", 1))
	s := openSotW(t, dial(t, legacyRelay(t, o)))
	y := &syncer{o: o}
	names := func(r *discoveryv3.DiscoveryResponse) map[string]int64 {
		out := map[string]int64{}
		for _, a := range r.GetResources() {
			c := &clusterv3.Cluster{}
			if err := a.UnmarshalTo(c); err != nil {
				t.Fatal(err)
			}
			out[c.GetName()] = c.GetConnectTimeout().GetSeconds()
		}
		return out
	}
	ack := func(r *discoveryv3.DiscoveryResponse, ns ...string) {
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: ns})
	}

	// 1. resource_names unset: *.
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType})
	r := s.Recv()
	for len(names(r)) < 2 {
		ack(r)
		r = s.Recv()
	}
	// 2. * and A: the full state again.
	ack(r, "*", "A")
	r = s.Recv()
	if got := names(r); len(got) != 2 {
		t.Fatalf("after * and A: %v, want A and B", got)
	}
	// 3. A only: unsubscribes *; B's changes no longer come. (No response
	// answers the unsubscription: sync before the origin changes A.)
	ack(r, "A")
	y.sotw(t, s)
	o.set(resource.ClusterType, "A", cluster("A", 2))
	for {
		r = s.Recv()
		ack(r, "A")
		if got := names(r); got["A"] == 2 {
			if _, ok := got["B"]; ok {
				t.Fatalf("after unsubscribing *: %v still has B", got)
			}
			break
		}
	}
	// 4. unset: unsubscribes A; not a wildcard any more.
	ack(r)
	y.sotw(t, s)
	o.set(resource.ClusterType, "A", cluster("A", 3))
	o.set(resource.ClusterType, "C", cluster("C", 1))
	s.None()
}
