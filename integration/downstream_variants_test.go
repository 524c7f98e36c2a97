package integration

import (
	"context"
	"sort"
	"testing"

	clusterv3s "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
)

func dsCluster(id string) string {
	return "xdstp://" + dsAuthority + "/envoy.config.cluster.v3.Cluster/" + id
}

// target is where a scenario's client connects: the origin directly, or the
// relay in front of it. Each run gets a fresh origin.
type target struct {
	name string
	conn func(t *testing.T, o *gcpOrigin) *grpc.ClientConn
}

var targets = []target{
	{"direct", func(t *testing.T, o *gcpOrigin) *grpc.ClientConn { return dial(t, o.addr) }},
	{"relay", func(t *testing.T, o *gcpOrigin) *grpc.ClientConn {
		r := startRelay(t, nil, o.addr)
		return dial(t, r.XDSAddr())
	}},
}

// A delta ADS client sees the same resources, versions and deletions
// directly from a go-control-plane origin and through the relay.
func TestDownstreamDeltaSameAsOrigin(t *testing.T) {
	c1, c2, c3 := dsCluster("c1"), dsCluster("c2"), dsCluster("c3")
	run := func(t *testing.T, tg target) []deltaView {
		o := newGCPOrigin(t)
		o.set(resource.ClusterType, c3, cluster(c3, 3))
		o.set(resource.ClusterType, c1, cluster(c1, 1))
		o.set(resource.ClusterType, c2, cluster(c2, 2))
		s := openDelta(t, tg.conn(t, o))
		view := deltaView{}
		var views []deltaView
		until := func(cond func() bool) {
			t.Helper()
			for !cond() {
				r := s.Recv()
				view.apply(r)
				s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
			}
			snap := deltaView{}
			for k, v := range view {
				snap[k] = v
			}
			views = append(views, snap)
		}
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c1, c2}})
		until(func() bool { return len(view) == 2 })
		o.set(resource.ClusterType, c1, cluster(c1, 5))
		until(func() bool { return proto.Equal(view[c1].GetResource(), mustAny(t, cluster(c1, 5))) })
		o.del(resource.ClusterType, c2)
		until(func() bool { _, ok := view[c2]; return !ok })
		// Unsubscribe c1; subscribing c3 afterwards and receiving it shows
		// the unsubscription was handled (requests are handled in order).
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesUnsubscribe: []string{c1}})
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c3}})
		until(func() bool { _, ok := view[c3]; return ok })
		o.set(resource.ClusterType, c1, cluster(c1, 7))
		s.None()
		return views
	}
	got := make(map[string][]deltaView)
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { got[tg.name] = run(t, tg) })
	}
	if d := cmp.Diff(got["direct"], got["relay"], protocmp.Transform()); d != "" {
		t.Fatalf("relay differs from origin (-direct +relay):\n%s", d)
	}
}

// A SotW client (ADS and the per-type CDS service) sees the same full-state
// Cluster responses directly and through the relay.
func TestDownstreamSotWSameAsOrigin(t *testing.T) {
	c1, c2 := dsCluster("c1"), dsCluster("c2")
	streams := []struct {
		name string
		open func(t *testing.T, conn *grpc.ClientConn) *sotwADS
	}{
		{"ads", func(t *testing.T, conn *grpc.ClientConn) *sotwADS { return openSotW(t, conn) }},
		{"cds", func(t *testing.T, conn *grpc.ClientConn) *sotwADS {
			c := clusterv3s.NewClusterDiscoveryServiceClient(conn)
			return openStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
				return c.StreamClusters(ctx)
			})
		}},
	}
	run := func(t *testing.T, tg target, open func(*testing.T, *grpc.ClientConn) *sotwADS) [][]*anypb.Any {
		if tg.name == "direct" {
			// The origin serves ADS only; the per-type stream is compared with it.
			open = func(t *testing.T, conn *grpc.ClientConn) *sotwADS { return openSotW(t, conn) }
		}
		o := newGCPOrigin(t)
		o.set(resource.ClusterType, c1, cluster(c1, 1))
		o.set(resource.ClusterType, c2, cluster(c2, 2))
		s := open(t, tg.conn(t, o))
		var seen [][]*anypb.Any
		var last *discoveryv3.DiscoveryResponse
		until := func(step string, cond func(*discoveryv3.DiscoveryResponse) bool) {
			t.Helper()
			t.Log("step", step)
			for {
				r := s.Recv()
				last = r
				s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: []string{c1, c2}})
				if tg.name == "direct" {
					// go-control-plane may miss an update that races with an
					// ACK; let the ACK land before the next change.
					o.waitFor("ACK "+r.GetNonce(), func() bool {
						for _, q := range o.sotwReqs {
							if q.GetResponseNonce() == r.GetNonce() {
								return true
							}
						}
						return false
					})
				}
				if cond(r) {
					rs := append([]*anypb.Any(nil), r.GetResources()...)
					sort.Slice(rs, func(i, j int) bool { return string(rs[i].GetValue()) < string(rs[j].GetValue()) })
					seen = append(seen, rs)
					return
				}
			}
		}
		s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{c1, c2}})
		until("subscribe", func(r *discoveryv3.DiscoveryResponse) bool { return len(r.GetResources()) == 2 })
		o.set(resource.ClusterType, c1, cluster(c1, 5))
		until("update", func(r *discoveryv3.DiscoveryResponse) bool {
			return len(r.GetResources()) == 2 && (proto.Equal(r.GetResources()[0], mustAny(t, cluster(c1, 5))) ||
				proto.Equal(r.GetResources()[1], mustAny(t, cluster(c1, 5))))
		})
		o.del(resource.ClusterType, c2)
		until("delete", func(r *discoveryv3.DiscoveryResponse) bool { return len(r.GetResources()) == 1 })
		_ = last
		return seen
	}
	for _, st := range streams {
		t.Run(st.name, func(t *testing.T) {
			got := make(map[string][][]*anypb.Any)
			for _, tg := range targets {
				t.Run(tg.name, func(t *testing.T) { got[tg.name] = run(t, tg, st.open) })
			}
			if d := cmp.Diff(got["direct"], got["relay"], protocmp.Transform()); d != "" {
				t.Fatalf("relay differs from origin (-direct +relay):\n%s", d)
			}
		})
	}
}
