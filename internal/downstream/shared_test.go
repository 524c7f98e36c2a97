package downstream

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestSharedEncoding: one origin change of new revisions reaches clients
// that subscribe by canonical names through the change's shared encoding
// (the fast path), and they receive exactly what the general path sends
// them, nonce aside. A client that spells a name its own way gets its
// spelling, through the general path.
func TestSharedEncoding(t *testing.T) {
	e1, e2 := xdstp(edsType, "e1"), xdstp(edsType, "e2")
	canonical, spelled := xdstp(edsType, "p?a=1&b=2"), xdstp(edsType, "p?b=2&a=1")
	type got struct {
		delta, spelledDelta *discoveryv3.DeltaDiscoveryResponse
		sotw                *discoveryv3.DiscoveryResponse
		shared              float64
	}
	run := func(t *testing.T, shared bool) got {
		e := newEnv(t, 0)
		e.srv.sharedEncoding = shared // before any stream: read-only from here
		for _, n := range []string{e1, e2, canonical} {
			e.put(edsType, n, "1")
		}
		d := e.delta()
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{e1, e2, canonical}})
		d.Send(ack(edsType, d.Recv()))
		sp := e.delta()
		sp.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{e1, e2, spelled}})
		sp.Send(ack(edsType, sp.Recv()))
		s := e.sotw()
		names := []string{e1, e2, canonical}
		s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: names})
		s.Send(sotwAck(s.Recv(), names...))
		e.syncDelta(d)
		e.syncDelta(sp)
		e.syncSotW(s)

		e.cache.Apply(cache.Update{Link: key(edsType, e1).Link, TypeURL: edsType, Resources: []*cache.Resource{
			res(edsType, e1, "2"), res(edsType, e2, "2"), res(edsType, canonical, "2"),
		}})
		var g got
		g.delta, g.spelledDelta, g.sotw = d.Recv(), sp.Recv(), s.Recv()
		d.None()
		sp.None()
		s.None()
		g.shared = testutil.ToFloat64(e.srv.m.sharedResponses.WithLabelValues(typeLabel(edsType)))
		return g
	}
	fast := run(t, true)
	general := run(t, false)

	if fast.shared != 2 || general.shared != 0 {
		t.Errorf("shared responses: %v with the fast path (want 2: the canonical delta and SotW clients), %v without (want 0)", fast.shared, general.shared)
	}
	for _, c := range []struct {
		name          string
		fast, general proto.Message
	}{
		{"delta", fast.delta, general.delta},
		{"delta, own spelling", fast.spelledDelta, general.spelledDelta},
		{"sotw", fast.sotw, general.sotw},
	} {
		if diff := cmp.Diff(c.general, c.fast, protocmp.Transform(), ignoreNonce,
			protocmp.IgnoreFields(&discoveryv3.DiscoveryResponse{}, "nonce")); diff != "" {
			t.Errorf("%s: fast path response differs from the general path's (-general +fast):\n%s", c.name, diff)
		}
	}
	if rs := fast.delta.GetResources(); len(rs) != 3 {
		t.Errorf("delta: %d resources, want the change's 3", len(rs))
	}
	var spelledNames []string
	for _, r := range fast.spelledDelta.GetResources() {
		spelledNames = append(spelledNames, r.GetName())
	}
	if diff := cmp.Diff([]string{e1, e2, spelled}, spelledNames); diff != "" {
		t.Errorf("own spelling client's names (-want +got):\n%s", diff)
	}
}
