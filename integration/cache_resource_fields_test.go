package integration

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The origin's Resource fields beside the body (aliases, metadata,
// cache_control) through the whole relay, with a scripted origin that
// can express them (go-control-plane's caches cannot).

// inSotWNode takes the Resource wrapper in SotW without TTLs, as gRPC's
// clients do.
var inSotWNode = &corev3.Node{Id: "in-sotw-node", Cluster: "ds-cluster", ClientFeatures: []string{xdstype.FeatureResourceInSotW}}

func traceMetadata(id string) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"trace": {Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(id)}},
	}}
}

// ignoreVersion: the relay gives each resource its own version.
var ignoreVersion = protocmp.IgnoreFields(&discoveryv3.Resource{}, "version")

// unwrap decodes a SotW resource sent in the Resource wrapper.
func unwrap(t *testing.T, a *anypb.Any) *discoveryv3.Resource {
	t.Helper()
	if a.GetTypeUrl() != xdstype.ResourceWrapperURL {
		t.Fatalf("SotW resource is a bare %s, want the Resource wrapper", a.GetTypeUrl())
	}
	var w discoveryv3.Resource
	if err := a.UnmarshalTo(&w); err != nil {
		t.Fatal(err)
	}
	return &w
}

// TestResourceFieldsThroughRelay: aliases, metadata and cache_control
// reach a delta client, and a SotW client that takes the wrapper, as the
// origin sent them; a change of metadata alone reaches both, under a new
// version.
func TestResourceFieldsThroughRelay(t *testing.T) {
	o := newScriptedOrigin(t)
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())
	name := dsCluster("fields")
	sent := &discoveryv3.Resource{Name: name, Version: "1", Resource: mustAny(t, cluster(name, 1)),
		Aliases: []string{"fields-alias"}, Metadata: traceMetadata("t1"), CacheControl: &discoveryv3.Resource_CacheControl{}}

	d := openDelta(t, conn)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{name}})
	o.next("subscription to "+name, subscribes(resource.ClusterType, name))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1", Resources: []*discoveryv3.Resource{sent}})
	o.next("ACK of n1", answers("n1"))
	got := d.Recv()
	if diff := cmp.Diff([]*discoveryv3.Resource{sent}, got.GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("delta resource (-origin +client):\n%s", diff)
	}
	v1 := got.GetResources()[0].GetVersion()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})

	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: inSotWNode, TypeUrl: resource.ClusterType, ResourceNames: []string{name}})
	sgot := s.Recv()
	if len(sgot.GetResources()) != 1 {
		t.Fatalf("SotW: %d resources, want 1", len(sgot.GetResources()))
	}
	if diff := cmp.Diff(sent, unwrap(t, sgot.GetResources()[0]), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("SotW wrapper (-origin +client):\n%s", diff)
	}
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: sgot.GetVersionInfo(), ResponseNonce: sgot.GetNonce(), ResourceNames: []string{name}})

	// Metadata alone changes (same bytes).
	sent2 := proto.Clone(sent).(*discoveryv3.Resource)
	sent2.Version, sent2.Metadata = "2", traceMetadata("t2")
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2", Resources: []*discoveryv3.Resource{sent2}})
	o.next("ACK of n2", answers("n2"))
	got = d.Recv()
	if diff := cmp.Diff([]*discoveryv3.Resource{sent2}, got.GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("delta, metadata change (-origin +client):\n%s", diff)
	}
	if got.GetResources()[0].GetVersion() == v1 {
		t.Errorf("a metadata-only change kept the version %s", v1)
	}
	sgot = s.Recv()
	if len(sgot.GetResources()) != 1 {
		t.Fatalf("SotW, metadata change: %d resources, want 1", len(sgot.GetResources()))
	}
	if diff := cmp.Diff(sent2, unwrap(t, sgot.GetResources()[0]), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("SotW, metadata change (-origin +client):\n%s", diff)
	}
}

// TestVHDSByAlias: on-demand VHDS subscribes to a virtual host by alias
// (routeconfig/domain); the origin answers with the virtual host under its
// own name, the alias among its aliases. The client gets that resource
// (before, the subscription waited forever), and a second client asking
// the same alias is answered from cache.
func TestVHDSByAlias(t *testing.T) {
	o := newScriptedOrigin(t)
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())
	const alias, own = "local_route/www.example.com", "local_route/vhost-www"
	vh := &routev3.VirtualHost{Name: own, Domains: []string{"www.example.com"}}
	sent := &discoveryv3.Resource{Name: own, Version: "1", Resource: mustAny(t, vh), Aliases: []string{alias}}

	d := openDelta(t, conn)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.VirtualHostType, ResourceNamesSubscribe: []string{alias}})
	o.next("subscription to "+alias, subscribes(resource.VirtualHostType, alias))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.VirtualHostType, Nonce: "n1", Resources: []*discoveryv3.Resource{sent}})
	o.next("ACK of n1", answers("n1"))
	got := d.Recv()
	if diff := cmp.Diff([]*discoveryv3.Resource{sent}, got.GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("VHDS answer (-origin +client):\n%s", diff)
	}

	hits := relayMetric(t, r, "xds_relay_cache_hits_total", "type", "envoy.config.route.v3.VirtualHost")
	d2 := openDelta(t, conn)
	d2.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.VirtualHostType, ResourceNamesSubscribe: []string{alias}})
	if diff := cmp.Diff([]*discoveryv3.Resource{sent}, d2.Recv().GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("second client (-origin +client):\n%s", diff)
	}
	if got := relayMetric(t, r, "xds_relay_cache_hits_total", "type", "envoy.config.route.v3.VirtualHost"); got != hits+1 {
		t.Errorf("cache hits for VirtualHost %v → %v, want one more (answered from cache)", hits, got)
	}
}

// TestDoNotCache: a resource the origin marks cache_control.do_not_cache
// is not served from cache to a later client: the relay asks the origin
// again and the late client gets the origin's fresh copy; it is not in the
// snapshot, so a restarted relay does not serve it either.
func TestDoNotCache(t *testing.T) {
	o := newScriptedOrigin(t)
	path := filepath.Join(t.TempDir(), "relay.snap")
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Cache.SnapshotPath = path
		cfg.Cache.RefetchInterval = 50 * time.Millisecond // its limit: TestDoNotCacheRefetchRateLimited
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	kept, dnc := dsCluster("kept"), dsCluster("do-not-cache")
	keptRes := &discoveryv3.Resource{Name: kept, Version: "1", Resource: mustAny(t, cluster(kept, 1))}
	dncRes := func(trace string) *discoveryv3.Resource {
		return &discoveryv3.Resource{Name: dnc, Version: "1", Resource: mustAny(t, cluster(dnc, 1)),
			Metadata: traceMetadata(trace), CacheControl: &discoveryv3.Resource_CacheControl{DoNotCache: true}}
	}

	first := openDelta(t, conn)
	first.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{kept, dnc}})
	o.next("subscription to "+dnc, subscribes(resource.ClusterType, dnc))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1", Resources: []*discoveryv3.Resource{keptRes, dncRes("first")}})
	o.next("ACK of n1", answers("n1"))
	got := first.Recv()
	byName := slices.SortedFunc(slices.Values(got.GetResources()), func(a, b *discoveryv3.Resource) int { return strings.Compare(a.GetName(), b.GetName()) })
	if diff := cmp.Diff([]*discoveryv3.Resource{dncRes("first"), keptRes}, byName, protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("first client (-origin +client):\n%s", diff)
	}
	first.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})

	late := openDelta(t, conn)
	late.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{kept, dnc}})
	got = late.Recv()
	if diff := cmp.Diff([]*discoveryv3.Resource{keptRes}, got.GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("late client, from cache (-want +got): only the cacheable resource\n%s", diff)
	}
	late.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})
	o.next(dnc+" asked of the origin again", subscribes(resource.ClusterType, dnc))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2", Resources: []*discoveryv3.Resource{dncRes("fresh")}})
	o.next("ACK of n2", answers("n2"))
	if diff := cmp.Diff([]*discoveryv3.Resource{dncRes("fresh")}, late.Recv().GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("late client, the origin's fresh copy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]*discoveryv3.Resource{dncRes("fresh")}, first.Recv().GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("first client, the new copy (-want +got):\n%s", diff)
	}
	first.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: "ack"})

	// A unary Fetch is not answered from cache either: it waits for the
	// origin's copy, asked for again on its behalf.
	fetched := make(chan *discoveryv3.DiscoveryResponse, 1)
	fetchErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
		defer cancel()
		resp, err := clusterservice.NewClusterDiscoveryServiceClient(conn).FetchClusters(ctx,
			&discoveryv3.DiscoveryRequest{Node: inSotWNode, TypeUrl: resource.ClusterType, ResourceNames: []string{dnc}})
		if err != nil {
			fetchErr <- err
			return
		}
		fetched <- resp
	}()
	o.next(dnc+" asked of the origin again for the Fetch", subscribes(resource.ClusterType, dnc))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n3", Resources: []*discoveryv3.Resource{dncRes("fetch")}})
	select {
	case resp := <-fetched:
		if len(resp.GetResources()) != 1 {
			t.Fatalf("Fetch got %d resources, want 1", len(resp.GetResources()))
		}
		if diff := cmp.Diff(dncRes("fetch"), unwrap(t, resp.GetResources()[0]), protocmp.Transform(), ignoreVersion); diff != "" {
			t.Fatalf("Fetch, the origin's fresh copy (-want +got):\n%s", diff)
		}
	case err := <-fetchErr:
		t.Fatalf("Fetch: %v", err)
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("Fetch not answered")
	}
	if n := relayMetric(t, r, "xds_relay_cache_refetches_total", "type", "envoy.config.cluster.v3.Cluster"); n != 2 {
		t.Errorf("refetches_total{type=Cluster} = %v, want 2 (the late stream, the Fetch)", n)
	}

	if err := r.Close(); err != nil {
		t.Fatalf("relay close: %v", err)
	}
	if n := relayMetric(t, r, "xds_relay_cache_snapshot_resources"); n != 1 {
		t.Errorf("snapshot_resources = %v, want 1 (the do_not_cache resource left out)", n)
	}

	// A relay restarted from the snapshot (the same config: the same
	// origin, which does not answer now) serves the cacheable resource and
	// not the other.
	r2 := startRelay(t, func(cfg *config.Config) { cfg.Cache.SnapshotPath = path }, o.addr)
	c := openDelta(t, dial(t, r2.XDSAddr()))
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{kept, dnc}})
	if diff := cmp.Diff([]*discoveryv3.Resource{keptRes}, c.Recv().GetResources(), protocmp.Transform(), ignoreVersion); diff != "" {
		t.Fatalf("restarted relay (-want +got): only the cacheable resource\n%s", diff)
	}
	c.None()
}
