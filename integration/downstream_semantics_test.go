package integration

import (
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// recvDelta receives and ACKs delta responses until cond holds on the view.
func recvDelta(t *testing.T, s *deltaADS, view deltaView, cond func() bool) {
	t.Helper()
	for !cond() {
		r := s.Recv()
		view.apply(r)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	}
}

// subscribeClusters sends s's first request, for clusters names, and
// returns the view once it holds them all.
func subscribeClusters(t *testing.T, s *deltaADS, names ...string) deltaView {
	t.Helper()
	s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: names})
	v := deltaView{}
	recvDelta(t, s, v, has(v, names...))
	return v
}

func has(view deltaView, names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if _, ok := view[n]; !ok {
				return false
			}
		}
		return true
	}
}

// A NACK is that client's: another client of the same resource keeps
// getting updates, and the NACKing client gets the next version.
func TestDownstreamNackIsolated(t *testing.T) {
	o := newGCPOrigin(t)
	c1 := dsCluster("nack")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())
	bad, good := openDelta(t, conn), openDelta(t, conn)
	for _, s := range []*deltaADS{bad, good} {
		subscribeClusters(t, s, c1)
	}
	o.set(resource.ClusterType, c1, cluster(c1, 2))
	got := bad.Recv()
	bad.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: "connect_timeout too short"}})
	if g := good.Recv(); len(g.GetResources()) != 1 || cmp.Diff(got.GetResources(), g.GetResources(), protocmp.Transform()) != "" {
		t.Fatalf("good client got %v, want %v", g, got)
	}
	good.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: got.GetNonce()})
	o.set(resource.ClusterType, c1, cluster(c1, 3))
	for _, s := range []*deltaADS{good, bad} {
		v := deltaView{}
		recvDelta(t, s, v, func() bool { return timeoutOf(v, c1) == 3 })
	}
}

// Two clients spelling one xdstp name with its context parameters in
// different orders each get it under their own spelling; the origin is
// asked once, by the canonical name.
func TestDownstreamNameSpelling(t *testing.T) {
	o := newGCPOrigin(t)
	canonical := dsCluster("svc?a=1&b=2")
	o.set(resource.ClusterType, canonical, cluster(canonical, 1))
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())
	for _, asked := range []string{dsCluster("svc?b=2&a=1"), canonical} {
		t.Run(asked, func(t *testing.T) {
			s := openDelta(t, conn)
			v := subscribeClusters(t, s, asked)
			if len(v) != 1 {
				t.Fatalf("got names %v, want only %q", v, asked)
			}
		})
	}
}

// Does-not-exist reaches a delta client as removed_resources, an empty glob
// is answered with its own name, and a reconnecting client's
// initial_resource_versions are honoured.
func TestDownstreamDeltaRemovalsAndReconnect(t *testing.T) {
	o := newGCPOrigin(t)
	same, changed, gone := dsCluster("same"), dsCluster("changed"), dsCluster("gone")
	emptyGlob := dsCluster("empty/*")
	o.set(resource.ClusterType, same, cluster(same, 1))
	o.set(resource.ClusterType, changed, cluster(changed, 1))
	o.set(resource.ClusterType, gone, cluster(gone, 1))
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())

	first := openDelta(t, conn)
	first.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{same, changed, gone, emptyGlob}})
	v := deltaView{}
	removed := map[string]bool{}
	// The empty glob is reported by name.
	for !has(v, same, changed, gone)() || !removed[emptyGlob] {
		resp := first.Recv()
		v.apply(resp)
		for _, n := range resp.GetRemovedResources() {
			removed[n] = true
		}
		first.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	versions := map[string]string{}
	for n, res := range v {
		versions[n] = res.GetVersion()
	}

	// While the client is away: one changes, one is deleted.
	o.set(resource.ClusterType, changed, cluster(changed, 2))
	o.del(resource.ClusterType, gone)

	again := openDelta(t, conn)
	again.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{same, changed, gone}, InitialResourceVersions: versions})
	got := map[string]bool{}
	var removedNow []string
	deadline := time.After(xdstest.WaitTimeout)
	for !(got[changed] && len(removedNow) == 1) {
		select {
		case <-deadline:
			t.Fatalf("after reconnect: resources %v removed %v", got, removedNow)
		default:
		}
		resp := again.Recv()
		for _, x := range resp.GetResources() {
			got[x.GetName()] = true
		}
		removedNow = append(removedNow, resp.GetRemovedResources()...)
		again.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	if got[same] || removedNow[0] != gone {
		t.Fatalf("after reconnect: resources %v removed %v; want only %q resent and %q removed", got, removedNow, changed, gone)
	}
	again.None()
}

// SotW: a stale nonce gets no response; the fresh request does.
func TestDownstreamSotWStaleNonce(t *testing.T) {
	o := newGCPOrigin(t)
	c1, c2 := dsCluster("s1"), dsCluster("s2")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	o.set(resource.ClusterType, c2, cluster(c2, 1))
	r := startRelay(t, nil, o.addr)
	s := openSotW(t, dial(t, r.XDSAddr()))
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNames: []string{c1}})
	first := s.Recv()
	o.set(resource.ClusterType, c1, cluster(c1, 2))
	second := s.Recv()
	if first.GetNonce() == second.GetNonce() {
		t.Fatalf("nonce %q reused", first.GetNonce())
	}
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce(), ResourceNames: []string{c1, c2}})
	s.None()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: second.GetVersionInfo(), ResponseNonce: second.GetNonce(), ResourceNames: []string{c1, c2}})
	if got := s.Recv(); len(got.GetResources()) != 2 {
		t.Fatalf("after a fresh request: %d clusters, want 2 (full state)", len(got.GetResources()))
	}
}

// Bad requests end only their stream, with a clear status; a client of the
// same relay keeps getting updates.
func TestDownstreamBadRequests(t *testing.T) {
	o := newGCPOrigin(t)
	c1 := dsCluster("ok")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Authorities[0].PlainNames = new(false) // refuse plain names
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	good := openDelta(t, conn)
	gv := subscribeClusters(t, good, c1)

	tests := []struct {
		name     string
		req      *discoveryv3.DiscoveryRequest
		code     codes.Code
		contains string
	}{
		{"duplicate names", &discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{c1, c1}}, codes.InvalidArgument, "twice"},
		{"empty type_url", &discoveryv3.DiscoveryRequest{ResourceNames: []string{c1}}, codes.InvalidArgument, "type_url"},
		{"malformed xdstp name", &discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"xdstp://ds.example/envoy.config.cluster.v3.Cluster/%zz"}}, codes.InvalidArgument, "malformed"},
		{"legacy name, no rule", &discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"plain-name"}}, codes.FailedPrecondition, `node id "ds-node" cluster "ds-cluster"`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openSotW(t, conn)
			tc.req.Node = testNodeDS
			s.Send(tc.req)
			st := s.Err()
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.contains) {
				t.Fatalf("status %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.contains)
			}
			o.set(resource.ClusterType, c1, cluster(c1, int64(10+i)))
			recvDelta(t, good, gv, func() bool { return timeoutOf(gv, c1) == int64(10+i) })
		})
	}
}
