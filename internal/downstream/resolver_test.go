package downstream

import (
	"testing"
	"unsafe"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// A canonical xdstp name resolves to a key holding the requested string
// itself, without allocating: every client's names cost the relay no copy.
func TestResolveCanonicalNoCopy(t *testing.T) {
	r := NewResolver([]string{"a"}, nil)
	name := "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-0001"
	res, err := r.Resolve(resourcev3.EndpointType, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(res.Key.Name) != unsafe.StringData(name) {
		t.Errorf("key name %q is a copy of the requested string", res.Key.Name)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = r.Resolve(resourcev3.EndpointType, name, nil) }); allocs != 0 {
		t.Errorf("Resolve of a canonical xdstp name: %v allocations, want 0", allocs)
	}
	other := "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-0001?b=2&a=1"
	if res, _ := r.Resolve(resourcev3.EndpointType, other, nil); res.Key.Name != "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-0001?a=1&b=2" {
		t.Errorf("non-canonical name resolved to %q", res.Key.Name)
	}
}
