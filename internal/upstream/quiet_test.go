package upstream

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// TestDeltaExpectsAnswer: a delta subscription needs an answer (origin
// liveness waits for one) unless every name it subscribes is a resource
// whose version the origin was told on this attempt.
func TestDeltaExpectsAnswer(t *testing.T) {
	const eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	req := func(irv map[string]string, sub ...string) *discoveryv3.DeltaDiscoveryRequest {
		return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, InitialResourceVersions: irv, ResourceNamesSubscribe: sub}
	}
	st := &deltaState{}
	steps := []struct {
		name  string
		parts []*discoveryv3.DeltaDiscoveryRequest
		want  bool
	}{
		{name: "every name told", parts: []*discoveryv3.DeltaDiscoveryRequest{req(map[string]string{"a": "1", "b": "2"}, "a", "b")}, want: false},
		{name: "told in an earlier part", parts: []*discoveryv3.DeltaDiscoveryRequest{req(map[string]string{"c": "1"}), req(nil, "c")}, want: false},
		{name: "told on an earlier request", parts: []*discoveryv3.DeltaDiscoveryRequest{req(nil, "a")}, want: false},
		{name: "a name not told", parts: []*discoveryv3.DeltaDiscoveryRequest{req(map[string]string{"d": "1"}, "d", "e")}, want: true},
		{name: "wildcard", parts: []*discoveryv3.DeltaDiscoveryRequest{req(map[string]string{"*": "1"}, "*")}, want: true},
		{name: "glob", parts: []*discoveryv3.DeltaDiscoveryRequest{req(nil, "xdstp://x/envoy.config.endpoint.v3.ClusterLoadAssignment/d/*")}, want: true},
		{name: "unsubscribe only", parts: []*discoveryv3.DeltaDiscoveryRequest{{TypeUrl: eds, ResourceNamesUnsubscribe: []string{"a"}}}, want: false},
	}
	for _, s := range steps {
		if got := st.expectsAnswer(eds, s.parts); got != s.want {
			t.Errorf("%s: expectsAnswer = %v, want %v", s.name, got, s.want)
		}
	}
	if st.expectsAnswer("other", []*discoveryv3.DeltaDiscoveryRequest{req(nil, "a")}) != true {
		t.Error("a name told for another type: no answer expected")
	}
}
