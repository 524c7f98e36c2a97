package integration

import (
	"maps"
	"slices"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// workloadType is a mesh's own resource type: no package of this process
// registers it, so neither the relay nor go-control-plane can decode it.
const workloadType = "type.googleapis.com/mesh.example.v1.Workload"

// workloadDesc is mesh.example.v1.Workload {string name = 1; string
// address = 2;}, built at run time and registered nowhere.
var workloadDesc = sync.OnceValues(func() (protoreflect.MessageDescriptor, error) {
	f, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("mesh/example/v1/workload.proto"),
		Package: proto.String("mesh.example.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Workload"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("name"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("name")},
				{Name: proto.String("address"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("address")},
			},
		}},
	}, nil)
	if err != nil {
		return nil, err
	}
	return f.Messages().Get(0), nil
})

// workload is a Workload named name at address.
func workload(t testing.TB, name, address string) types.Resource {
	t.Helper()
	md, err := workloadDesc()
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("name"), protoreflect.ValueOfString(name))
	m.Set(md.Fields().ByName("address"), protoreflect.ValueOfString(address))
	return m
}

// workloadOf decodes a Workload body as its client does: name, address.
func workloadOf(t testing.TB, a *anypb.Any) (name, address string) {
	t.Helper()
	if a.GetTypeUrl() != workloadType {
		t.Fatalf("body of type %s, want %s", a.GetTypeUrl(), workloadType)
	}
	md, err := workloadDesc()
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		t.Fatal(err)
	}
	return m.Get(md.Fields().ByName("name")).String(), m.Get(md.Fields().ByName("address")).String()
}

// TestCustomTypeOverADS: a type the relay does not serve, listed in
// authorities[].types, flows over ADS delta and SotW like a served one:
// explicit xdstp names and a glob (emulated over the origin's wildcard),
// bodies passed through byte for byte, updates fanned out, and metrics
// labelled by the type's own name. The origin is go-control-plane, which
// serves it from a LinearCache without knowing the message either.
func TestCustomTypeOverADS(t *testing.T) {
	o := serveOrigin(t, linearOrigin(resource.ClusterType, workloadType), nil)
	prefix := "xdstp://" + dsAuthority + "/mesh.example.v1.Workload/"
	w1, w2, other := prefix+"ns1/w1", prefix+"ns1/w2", prefix+"ns2/w3"
	glob := prefix + "ns1/*"
	o.setAll(workloadType, map[string]types.Resource{
		w1: workload(t, w1, "10.0.0.1"), w2: workload(t, w2, "10.0.0.2"), other: workload(t, other, "10.0.0.3")})
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Authorities[0].Types = []string{resource.ClusterType, workloadType}
	}, o.addr)
	conn := dial(t, r.XDSAddr())

	// Delta: an explicit name and a glob.
	d := openDelta(t, conn)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: workloadType, ResourceNamesSubscribe: []string{other, glob}})
	held := deltaView{}
	recvWorkloads := func(want map[string]string) {
		t.Helper()
		recvDelta(t, d, held, func() bool { return sameWorkloads(t, held, want) })
	}
	recvWorkloads(map[string]string{w1: "10.0.0.1", w2: "10.0.0.2", other: "10.0.0.3"})

	// SotW: the same names; bodies are the origin's bytes.
	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: workloadType, ResourceNames: []string{other, glob}})
	sotwHeld := map[string]string{}
	recvSotW := func(want map[string]string) {
		t.Helper()
		for !maps.Equal(sotwHeld, want) {
			resp := s.Recv()
			for _, a := range resp.GetResources() {
				n, addr := workloadOf(t, a)
				sotwHeld[n] = addr
			}
			s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: workloadType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: []string{other, glob}})
		}
	}
	recvSotW(map[string]string{w1: "10.0.0.1", w2: "10.0.0.2", other: "10.0.0.3"})

	// An update at the origin reaches both.
	o.set(workloadType, w2, workload(t, w2, "10.0.0.22"))
	recvWorkloads(map[string]string{w1: "10.0.0.1", w2: "10.0.0.22", other: "10.0.0.3"})
	recvSotW(map[string]string{w1: "10.0.0.1", w2: "10.0.0.22", other: "10.0.0.3"})

	// Labelled by its own name, at every layer.
	for _, m := range []string{"xds_relay_downstream_requests_total", "xds_relay_upstream_responses_total", "xds_relay_cache_misses_total"} {
		if n := relayMetric(t, r, m, "type", "mesh.example.v1.Workload"); n == 0 {
			t.Errorf("%s{type=\"mesh.example.v1.Workload\"} = 0, want > 0", m)
		}
	}
}

// TestCustomTypeNotListed: a type neither served nor listed is refused as
// before: a delta client gets its name in removed_resources, and the
// origin is never asked for it.
func TestCustomTypeNotListed(t *testing.T) {
	o := serveOrigin(t, linearOrigin(resource.ClusterType, workloadType), nil)
	w1 := "xdstp://" + dsAuthority + "/mesh.example.v1.Workload/w1"
	o.set(workloadType, w1, workload(t, w1, "10.0.0.1"))
	r := startRelay(t, nil, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: workloadType, ResourceNamesSubscribe: []string{w1}})
	got := d.Recv()
	if len(got.GetResources()) != 0 || !slices.Equal(got.GetRemovedResources(), []string{w1}) {
		t.Fatalf("answer to a type not carried: %v, want %s in removed_resources only", got, w1)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, q := range o.deltaReqs {
		if q.GetTypeUrl() == workloadType {
			t.Fatalf("origin was asked for %s: %v", workloadType, q)
		}
	}
}

// sameWorkloads reports whether a delta client holds exactly want (name →
// address).
func sameWorkloads(t testing.TB, held deltaView, want map[string]string) bool {
	t.Helper()
	got := map[string]string{}
	for n, x := range held {
		name, addr := workloadOf(t, x.GetResource())
		if name != n {
			t.Fatalf("resource %q carries a body named %q", n, name)
		}
		got[n] = addr
	}
	return maps.Equal(got, want)
}

// TestNamelessTypeInWrapperForSotW (issue #26): a listed type whose
// message has no name field (google.protobuf.Struct), served by a
// go-control-plane origin, reaches a SotW client that advertises
// xds.config.resource-in-sotw in the Resource wrapper, named; bare, it
// could not tell which resource is which. A SotW client without the
// feature gets the bare bodies, as before (it may not unwrap).
func TestNamelessTypeInWrapperForSotW(t *testing.T) {
	const structType = "type.googleapis.com/google.protobuf.Struct"
	o := serveOrigin(t, linearOrigin(resource.ClusterType, structType), nil)
	prefix := "xdstp://" + dsAuthority + "/google.protobuf.Struct/"
	names := []string{prefix + "s1", prefix + "s2"}
	bodies := map[string]types.Resource{}
	for i, n := range names {
		s, err := structpb.NewStruct(map[string]any{"index": i})
		if err != nil {
			t.Fatal(err)
		}
		bodies[n] = s
	}
	o.setAll(structType, bodies)
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Authorities[0].Types = []string{resource.ClusterType, structType}
	}, o.addr)
	conn := dial(t, r.XDSAddr())

	wrapped := openSotW(t, conn)
	node := &corev3.Node{Id: "grpc-like", ClientFeatures: []string{xdstype.FeatureResourceInSotW}}
	wrapped.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: structType, ResourceNames: names})
	got := map[string]float64{}
	for len(got) < len(names) {
		resp := wrapped.Recv()
		for _, a := range resp.GetResources() {
			if a.GetTypeUrl() != xdstype.ResourceWrapperURL {
				t.Fatalf("a %s resource came bare (%s) to a resource-in-sotw client: it cannot tell its name", structType, a.GetTypeUrl())
			}
			var w discoveryv3.Resource
			if err := a.UnmarshalTo(&w); err != nil {
				t.Fatal(err)
			}
			var s structpb.Struct
			if err := w.GetResource().UnmarshalTo(&s); err != nil {
				t.Fatal(err)
			}
			got[w.GetName()] = s.GetFields()["index"].GetNumberValue()
		}
		wrapped.Send(&discoveryv3.DiscoveryRequest{TypeUrl: structType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: names})
	}
	if want := map[string]float64{names[0]: 0, names[1]: 1}; !maps.Equal(got, want) {
		t.Errorf("the wrapped client holds %v, want %v", got, want)
	}

	bare := openSotW(t, conn)
	bare.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: structType, ResourceNames: names})
	for n := 0; n < len(names); {
		resp := bare.Recv()
		for _, a := range resp.GetResources() {
			if a.GetTypeUrl() != structType {
				t.Fatalf("a client without resource-in-sotw got a %s, want the bare %s", a.GetTypeUrl(), structType)
			}
			n++
		}
		bare.Send(&discoveryv3.DiscoveryRequest{TypeUrl: structType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: names})
	}
}
