package downstream

import (
	"context"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionv3 "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

type (
	sotwStream  = grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	deltaStream = grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

// Register registers the ADS and every per-type discovery service on r.
// A stream's handler waits in Recv, so it ends when its gRPC stream does
// (the client leaves, the grpc.Server stops, EndStream), not when a
// context an interceptor gave it ends: an interceptor ends a stream with
// EndStream.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(r, s)
	listenerv3.RegisterListenerDiscoveryServiceServer(r, s)
	routev3.RegisterRouteDiscoveryServiceServer(r, s)
	routev3.RegisterScopedRoutesDiscoveryServiceServer(r, s)
	routev3.RegisterVirtualHostDiscoveryServiceServer(r, s)
	clusterv3.RegisterClusterDiscoveryServiceServer(r, s)
	endpointv3.RegisterEndpointDiscoveryServiceServer(r, s)
	endpointv3.RegisterLocalityEndpointDiscoveryServiceServer(r, s)
	secretv3.RegisterSecretDiscoveryServiceServer(r, s)
	runtimev3.RegisterRuntimeDiscoveryServiceServer(r, s)
	extensionv3.RegisterExtensionConfigDiscoveryServiceServer(r, s)
}

func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// serveSotW serves one SotW stream; typeURL is "" for ADS.
func (s *Server) serveSotW(st sotwStream, typeURL string) error {
	return serve(s, st, xdstype.SotW, typeURL, (*session).handleSotW)
}

// serveDelta serves one delta stream; typeURL is "" for ADS.
func (s *Server) serveDelta(st deltaStream, typeURL string) error {
	return serve(s, st, xdstype.Delta, typeURL, (*session).handleDelta)
}

// serve runs one session over a stream of either variant: this goroutine
// receives and handles st's requests, the writer sends on st. Its frame,
// run's and loop's stay on the stack of an idle stream, under gRPC's Recv:
// they are kept small (the setup is in openSession, the handling of a
// request in loop's apply), as every byte of an idle stream's stack is
// scanned at each collection, and adds to the heap the next one allows.
func serve[Req, Resp any](s *Server, st grpc.BidiStreamingServer[Req, Resp], variant xdstype.Variant, typeURL string, handle func(*session, *Req) error) error {
	ss, leave, err := openSession(s, st, variant, typeURL)
	if err != nil {
		return err
	}
	defer leave()
	recv := func() (any, error) { return st.Recv() }
	if s.sharedEncoding { // Codec is gRPC's: it keeps a laterRequest's bytes
		var later laterRequest
		recv = func() (any, error) {
			if err := st.RecvMsg(&later); err != nil {
				return nil, err
			}
			m := new(Req)
			return m, later.decode(m)
		}
	}
	return ss.run(st.Context(), recv, func(m any) error { return handle(ss, m.(*Req)) })
}

// openSession admits a stream and makes its session; leave gives back
// its place among the streams admitted.
//
//go:noinline
func openSession[Req, Resp any](s *Server, st grpc.BidiStreamingServer[Req, Resp], variant xdstype.Variant, typeURL string) (ss *session, leave func(), err error) {
	sw := statusWriterOf(st.Context())
	if sw == nil {
		return nil, nil, s.noStatusWriter()
	}
	leave, err = s.admitStream()
	if err != nil {
		return nil, nil, err
	}
	ss = newSession(s, variant, typeURL, peerOf(st.Context()), certIdentity(st.Context()), func(r *encodedResponse) error {
		if s.sharedEncoding {
			return st.SendMsg(r) // Codec sends its bytes as they are
		}
		// A grpc.Server without Codec: decoded, and encoded again by it.
		resp := new(Resp)
		if err := proto.Unmarshal(r.bytes(), any(resp).(proto.Message)); err != nil {
			return err
		}
		return st.Send(resp)
	})
	ss.stream = sw
	return ss, leave, nil
}

// noStatusWriter is the status of a stream whose context carries no
// transport stream that writes statuses (streamend.go): gRPC is not the
// one this was written against, and nothing could end the stream's
// handler while it waits in Recv.
func (s *Server) noStatusWriter() error {
	s.lg.Error("the gRPC stream cannot be ended from outside its handler (see streamend.go): refusing streams")
	return status.Error(codes.Internal, "xDS streams are not served: this relay's gRPC library is not the one it was built for")
}

// ADS.

func (s *Server) StreamAggregatedResources(st sotwStream) error { return s.serveSotW(st, "") }
func (s *Server) DeltaAggregatedResources(st deltaStream) error { return s.serveDelta(st, "") }

// Per-type services: the same session, with the stream's type fixed.

func (s *Server) StreamListeners(st sotwStream) error {
	return s.serveSotW(st, resourcev3.ListenerType)
}
func (s *Server) DeltaListeners(st deltaStream) error {
	return s.serveDelta(st, resourcev3.ListenerType)
}
func (s *Server) FetchListeners(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.ListenerType)
}

func (s *Server) StreamRoutes(st sotwStream) error { return s.serveSotW(st, resourcev3.RouteType) }
func (s *Server) DeltaRoutes(st deltaStream) error { return s.serveDelta(st, resourcev3.RouteType) }
func (s *Server) FetchRoutes(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.RouteType)
}

func (s *Server) StreamScopedRoutes(st sotwStream) error {
	return s.serveSotW(st, resourcev3.ScopedRouteType)
}
func (s *Server) DeltaScopedRoutes(st deltaStream) error {
	return s.serveDelta(st, resourcev3.ScopedRouteType)
}
func (s *Server) FetchScopedRoutes(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.ScopedRouteType)
}

func (s *Server) DeltaVirtualHosts(st deltaStream) error {
	return s.serveDelta(st, resourcev3.VirtualHostType)
}

func (s *Server) StreamClusters(st sotwStream) error { return s.serveSotW(st, resourcev3.ClusterType) }
func (s *Server) DeltaClusters(st deltaStream) error { return s.serveDelta(st, resourcev3.ClusterType) }
func (s *Server) FetchClusters(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.ClusterType)
}

func (s *Server) StreamEndpoints(st sotwStream) error {
	return s.serveSotW(st, resourcev3.EndpointType)
}
func (s *Server) DeltaEndpoints(st deltaStream) error {
	return s.serveDelta(st, resourcev3.EndpointType)
}
func (s *Server) FetchEndpoints(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.EndpointType)
}

// LEDS is delta only: its clients subscribe to glob collections.
func (s *Server) DeltaLocalityEndpoints(st deltaStream) error {
	return s.serveDelta(st, xdstype.LbEndpointType)
}

func (s *Server) StreamSecrets(st sotwStream) error { return s.serveSotW(st, resourcev3.SecretType) }
func (s *Server) DeltaSecrets(st deltaStream) error { return s.serveDelta(st, resourcev3.SecretType) }
func (s *Server) FetchSecrets(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.SecretType)
}

func (s *Server) StreamRuntime(st sotwStream) error { return s.serveSotW(st, resourcev3.RuntimeType) }
func (s *Server) DeltaRuntime(st deltaStream) error { return s.serveDelta(st, resourcev3.RuntimeType) }
func (s *Server) FetchRuntime(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.RuntimeType)
}

func (s *Server) StreamExtensionConfigs(st sotwStream) error {
	return s.serveSotW(st, resourcev3.ExtensionConfigType)
}
func (s *Server) DeltaExtensionConfigs(st deltaStream) error {
	return s.serveDelta(st, resourcev3.ExtensionConfigType)
}
func (s *Server) FetchExtensionConfigs(ctx context.Context, req *discoveryv3.DiscoveryRequest) (*discoveryv3.DiscoveryResponse, error) {
	return s.fetchRPC(ctx, req, resourcev3.ExtensionConfigType)
}
