package upstream

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
)

// TestDeltaLivenessProbe: an attempt's first subscription that tells the
// origin the version of every name it asks for carries one wrong version
// (the first name's), so the origin must answer; any other first
// subscription, and every later one, is left as it is.
func TestDeltaLivenessProbe(t *testing.T) {
	const eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	for _, tc := range []struct {
		name      string
		irv       map[string]string
		subscribe []string
		want      map[string]string
	}{
		{name: "every name told", irv: map[string]string{"a": "1", "b": "2", "z": "9"}, subscribe: []string{"a", "b"},
			want: map[string]string{"a": probeVersion, "b": "2", "z": "9"}},
		{name: "a name not told", irv: map[string]string{"a": "1"}, subscribe: []string{"a", "b"}, want: map[string]string{"a": "1"}},
		{name: "nothing told", subscribe: []string{"a"}},
		{name: "wildcard", irv: map[string]string{"*": "1", "a": "1"}, subscribe: []string{"*", "a"}, want: map[string]string{"*": "1", "a": "1"}},
		{name: "glob", irv: map[string]string{"a": "1"}, subscribe: []string{"a", "xdstp://x/envoy.config.endpoint.v3.ClusterLoadAssignment/d/*"},
			want: map[string]string{"a": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &deltaState{}
			req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, InitialResourceVersions: tc.irv, ResourceNamesSubscribe: tc.subscribe}
			st.probe(req)
			if diff := cmp.Diff(tc.want, req.GetInitialResourceVersions()); diff != "" {
				t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
			}
			// Only the attempt's first subscription is a probe.
			again := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: eds, InitialResourceVersions: map[string]string{"c": "1"}, ResourceNamesSubscribe: []string{"c"}}
			st.probe(again)
			if again.GetInitialResourceVersions()["c"] != "1" {
				t.Errorf("a later subscription was probed: %v", again.GetInitialResourceVersions())
			}
		})
	}
}
