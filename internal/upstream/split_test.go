package upstream

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
)

// TestSplitDelta: a subscription request over the size bound is split into
// requests within it that together name every name once, in order; the
// node and initial_resource_versions go only in the first.
func TestSplitDelta(t *testing.T) {
	const max = 4 << 10
	var subscribe, unsubscribe []string
	irv := map[string]string{}
	for i := range 400 {
		n := fmt.Sprintf("xdstp://auth.example/envoy.config.endpoint.v3.ClusterLoadAssignment/svc/%04d", i)
		subscribe = append(subscribe, n)
		irv[n] = fmt.Sprintf("%064x", i)
	}
	for i := range 50 {
		unsubscribe = append(unsubscribe, fmt.Sprintf("gone-%d", i))
	}
	req := &discoveryv3.DeltaDiscoveryRequest{
		Node: &corev3.Node{Id: "relay"}, TypeUrl: resourcev3.EndpointType,
		ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe, InitialResourceVersions: irv,
	}
	parts := splitDelta(req, max)
	if len(parts) < 2 {
		t.Fatalf("a %d-byte request was not split (bound %d)", proto.Size(req), max)
	}
	var gotSub, gotUnsub []string
	gotIRV := map[string]string{}
	for i, p := range parts {
		if s := proto.Size(p); s > max {
			t.Errorf("part %d is %d bytes, over %d", i, s, max)
		}
		if p.GetTypeUrl() != req.GetTypeUrl() {
			t.Errorf("part %d type %q", i, p.GetTypeUrl())
		}
		if (p.GetNode() != nil) != (i == 0) || (len(p.GetInitialResourceVersions()) > 0 && i > 0) {
			t.Errorf("part %d: node %v, %d initial versions (only the first carries them)", i, p.GetNode(), len(p.GetInitialResourceVersions()))
		}
		gotSub = append(gotSub, p.GetResourceNamesSubscribe()...)
		gotUnsub = append(gotUnsub, p.GetResourceNamesUnsubscribe()...)
		maps.Copy(gotIRV, p.GetInitialResourceVersions())
	}
	if diff := cmp.Diff(subscribe, gotSub); diff != "" {
		t.Errorf("subscribed names across parts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(unsubscribe, gotUnsub); diff != "" {
		t.Errorf("unsubscribed names across parts (-want +got):\n%s", diff)
	}
	for _, k := range slices.Sorted(maps.Keys(gotIRV)) {
		if gotIRV[k] != irv[k] {
			t.Errorf("initial version of %s: %q, want %q", k, gotIRV[k], irv[k])
		}
	}
	small := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: subscribe[:3]}
	if got := splitDelta(small, max); len(got) != 1 || got[0] != small {
		t.Error("a request within the bound was changed")
	}
}

// TestDeltaSyncSplits: a link's first sync of many names sends them in
// requests within the link's bound.
func TestDeltaSyncSplits(t *testing.T) {
	l := testLink(false)
	l.mgr.maxRequest = 2 << 10
	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/n%04d", i))
	}
	l.update(nil, resourcev3.EndpointType, names, true)
	ads := &fakeADS[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]{}
	st := newDeltaState()
	if err := l.deltaSync(ads, st); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, r := range ads.sent {
		if s := proto.Size(r); s > l.mgr.maxRequest {
			t.Errorf("request %d is %d bytes, over %d", i, s, l.mgr.maxRequest)
		}
		got = append(got, r.GetResourceNamesSubscribe()...)
	}
	if len(ads.sent) < 2 || !slices.Equal(got, names) {
		t.Errorf("%d requests naming %d names, want several naming all %d in order", len(ads.sent), len(got), len(names))
	}
}
