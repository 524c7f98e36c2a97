package loadgen

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// ackEvent is one ACK or NACK the test origin received: which client sent
// it and which resources the response it answers carried.
type ackEvent struct {
	node  string
	names []string
	nack  bool
}

// testOrigin is a go-control-plane server over a LinearCache of
// ClusterLoadAssignments, on 127.0.0.1:0, that reports every (N)ACK.
type testOrigin struct {
	addr  string
	cache *cachev3.LinearCache
	acks  chan ackEvent

	// responses and bytes count what the origin sent: responses and their
	// serialized size.
	responses, bytes atomic.Int64

	mu    sync.Mutex
	nodes map[int64]string              // guarded by mu: stream → node id
	sent  map[int64]map[string][]string // guarded by mu: stream → nonce → names
}

func startOrigin(t *testing.T, names []string) *testOrigin {
	t.Helper()
	o := &testOrigin{
		cache: cachev3.NewLinearCache(resourcev3.EndpointType),
		acks:  make(chan ackEvent, 1024),
		nodes: make(map[int64]string),
		sent:  make(map[int64]map[string][]string),
	}
	for _, n := range names {
		if err := o.cache.UpdateResource(n, cla(n, time.Time{})); err != nil {
			t.Fatalf("seed %s: %v", n, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, o.cache, serverv3.CallbackFuncs{
		StreamRequestFunc: func(id int64, r *discoveryv3.DiscoveryRequest) error {
			o.request(id, r.GetNode(), r.GetResponseNonce(), r.GetErrorDetail() != nil)
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			o.responses.Add(1)
			o.bytes.Add(int64(proto.Size(r)))
			var got []string
			for _, a := range r.GetResources() {
				n, _, err := sotwResource(a)
				if err != nil {
					t.Errorf("origin sent an unreadable resource: %v", err)
				}
				got = append(got, n)
			}
			o.response(id, r.GetNonce(), got)
		},
		StreamDeltaRequestFunc: func(id int64, r *discoveryv3.DeltaDiscoveryRequest) error {
			o.request(id, r.GetNode(), r.GetResponseNonce(), r.GetErrorDetail() != nil)
			return nil
		},
		StreamDeltaResponseFunc: func(id int64, _ *discoveryv3.DeltaDiscoveryRequest, r *discoveryv3.DeltaDiscoveryResponse) {
			o.responses.Add(1)
			o.bytes.Add(int64(proto.Size(r)))
			var got []string
			for _, res := range r.GetResources() {
				got = append(got, res.GetName())
			}
			o.response(id, r.GetNonce(), got)
		},
	})
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	o.addr = lis.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis) // returns when stopped
	}()
	t.Cleanup(func() {
		cancel()
		gs.Stop()
		<-done
	})
	return o
}

func (o *testOrigin) response(stream int64, nonce string, names []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sent[stream] == nil {
		o.sent[stream] = make(map[string][]string)
	}
	o.sent[stream][nonce] = names
}

func (o *testOrigin) request(stream int64, node *corev3.Node, nonce string, nack bool) {
	o.mu.Lock()
	if node.GetId() != "" {
		o.nodes[stream] = node.GetId()
	}
	names, ok := o.sent[stream][nonce]
	delete(o.sent[stream], nonce)
	ev := ackEvent{node: o.nodes[stream], names: names, nack: nack}
	o.mu.Unlock()
	if nonce == "" || !ok {
		return
	}
	o.acks <- ev // buffered beyond what a test sends; a test that overflows it fails on its deadline
}

// push replaces names with new revisions stamped with the push time, in
// one change of the cache (one response per client).
func (o *testOrigin) push(t *testing.T, names ...string) {
	t.Helper()
	now := time.Now()
	res := make(map[string]types.Resource, len(names))
	for _, n := range names {
		res[n] = cla(n, now)
	}
	if err := o.cache.UpdateResources(res, nil); err != nil {
		t.Fatalf("push %v: %v", names, err)
	}
}

// cla is a ClusterLoadAssignment named name; a non-zero pushed is embedded
// as a push stamp in the endpoint's metadata.
func cla(name string, pushed time.Time) *endpointv3.ClusterLoadAssignment {
	md := &corev3.Metadata{}
	if !pushed.IsZero() {
		md.FilterMetadata = map[string]*structpb.Struct{"bench": {Fields: map[string]*structpb.Value{
			"push": structpb.NewStringValue(Stamp(pushed)),
		}}}
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address:       "10.0.0.1",
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
					}}},
				}},
				Metadata: md,
			}},
		}},
	}
}
