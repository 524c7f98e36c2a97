package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionservice "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Per-type transports (delta-per-type, sotw-per-type) carry a link over one
// stream per type on the per-type services (CDS, EDS, LDS, ...) instead of
// one ADS stream, for origins without ADS. The attempt's loop, requests and
// response handling are the ADS ones (delta.go, sotw.go): only the stream
// differs. perTypeStreams is one stream to the attempt: Send routes each
// request to its type's stream (opened by the first request of the type,
// which carries the node), Recv yields the responses of all of them, and
// the first error of any ends the attempt. An error that says the origin
// has no service for a type (Unimplemented, or no per-type service at all)
// names the type, so that it costs only that type (refused.go); any other
// (the origin went away, say) names none, and the attempt's streams start
// over together with every type, as an ADS stream's would.

// streamOpener opens one stream of a transport on a connection.
type streamOpener[Req, Resp any] func(grpc.ClientConnInterface, context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error)

// via makes a streamOpener of a generated client's constructor and one of
// its stream methods (a method expression such as
// clusterservice.ClusterDiscoveryServiceClient.StreamClusters).
func via[C, Req, Resp any](newClient func(grpc.ClientConnInterface) C,
	method func(C, context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error)) streamOpener[Req, Resp] {
	return func(conn grpc.ClientConnInterface, ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error) {
		return method(newClient(conn), ctx, opts...)
	}
}

type (
	sotwStream  = grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	deltaStream = grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

// The ADS openers, and the per-type services' by type URL.
var (
	sotwADS  = via(discoveryv3.NewAggregatedDiscoveryServiceClient, discoveryv3.AggregatedDiscoveryServiceClient.StreamAggregatedResources)
	deltaADS = via(discoveryv3.NewAggregatedDiscoveryServiceClient, discoveryv3.AggregatedDiscoveryServiceClient.DeltaAggregatedResources)

	sotwPerType = map[string]streamOpener[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]{
		resourcev3.ClusterType:         via(clusterservice.NewClusterDiscoveryServiceClient, clusterservice.ClusterDiscoveryServiceClient.StreamClusters),
		resourcev3.EndpointType:        via(endpointservice.NewEndpointDiscoveryServiceClient, endpointservice.EndpointDiscoveryServiceClient.StreamEndpoints),
		resourcev3.ListenerType:        via(listenerservice.NewListenerDiscoveryServiceClient, listenerservice.ListenerDiscoveryServiceClient.StreamListeners),
		resourcev3.RouteType:           via(routeservice.NewRouteDiscoveryServiceClient, routeservice.RouteDiscoveryServiceClient.StreamRoutes),
		resourcev3.ScopedRouteType:     via(routeservice.NewScopedRoutesDiscoveryServiceClient, routeservice.ScopedRoutesDiscoveryServiceClient.StreamScopedRoutes),
		resourcev3.SecretType:          via(secretservice.NewSecretDiscoveryServiceClient, secretservice.SecretDiscoveryServiceClient.StreamSecrets),
		resourcev3.RuntimeType:         via(runtimeservice.NewRuntimeDiscoveryServiceClient, runtimeservice.RuntimeDiscoveryServiceClient.StreamRuntime),
		resourcev3.ExtensionConfigType: via(extensionservice.NewExtensionConfigDiscoveryServiceClient, extensionservice.ExtensionConfigDiscoveryServiceClient.StreamExtensionConfigs),
	}
	deltaPerType = map[string]streamOpener[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]{
		resourcev3.ClusterType:         via(clusterservice.NewClusterDiscoveryServiceClient, clusterservice.ClusterDiscoveryServiceClient.DeltaClusters),
		resourcev3.EndpointType:        via(endpointservice.NewEndpointDiscoveryServiceClient, endpointservice.EndpointDiscoveryServiceClient.DeltaEndpoints),
		resourcev3.ListenerType:        via(listenerservice.NewListenerDiscoveryServiceClient, listenerservice.ListenerDiscoveryServiceClient.DeltaListeners),
		resourcev3.RouteType:           via(routeservice.NewRouteDiscoveryServiceClient, routeservice.RouteDiscoveryServiceClient.DeltaRoutes),
		resourcev3.ScopedRouteType:     via(routeservice.NewScopedRoutesDiscoveryServiceClient, routeservice.ScopedRoutesDiscoveryServiceClient.DeltaScopedRoutes),
		resourcev3.VirtualHostType:     via(routeservice.NewVirtualHostDiscoveryServiceClient, routeservice.VirtualHostDiscoveryServiceClient.DeltaVirtualHosts),
		resourcev3.SecretType:          via(secretservice.NewSecretDiscoveryServiceClient, secretservice.SecretDiscoveryServiceClient.DeltaSecrets),
		resourcev3.RuntimeType:         via(runtimeservice.NewRuntimeDiscoveryServiceClient, runtimeservice.RuntimeDiscoveryServiceClient.DeltaRuntime),
		resourcev3.ExtensionConfigType: via(extensionservice.NewExtensionConfigDiscoveryServiceClient, extensionservice.ExtensionConfigDiscoveryServiceClient.DeltaExtensionConfigs),
	}
)

// perTypeOpener is the streamOpener of a per-type transport: it opens no
// stream yet, and returns a perTypeStreams that opens one per type.
func perTypeOpener[Req, Resp any](openers map[string]streamOpener[Req, Resp]) streamOpener[Req, Resp] {
	return func(conn grpc.ClientConnInterface, ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error) {
		return &perTypeStreams[Req, Resp]{
			ctx: ctx, conn: conn, opts: opts, openers: openers,
			streams: make(map[string]grpc.BidiStreamingClient[Req, Resp]),
			out:     make(chan *Resp),
			errc:    make(chan error, 1),
		}, nil
	}
}

// perTypeStreams is one attempt's per-type streams, seen as one stream.
// Send and CloseSend are called by the link's run goroutine only (as on
// any gRPC stream, one sender); Recv by the attempt's receiver only.
type perTypeStreams[Req, Resp any] struct {
	ctx     context.Context // the attempt's: ending it ends every stream; read-only
	conn    grpc.ClientConnInterface
	opts    []grpc.CallOption
	openers map[string]streamOpener[Req, Resp] // read-only

	node    *corev3.Node                                   // sent on each stream's first request; owned by the sender
	streams map[string]grpc.BidiStreamingClient[Req, Resp] // by type URL; owned by the sender

	out  chan *Resp // from the receivers, unbuffered
	errc chan error // the first receiver error (1 slot)
	wg   sync.WaitGroup
}

// perTypeRequest is what routing needs of a request (DiscoveryRequest and
// DeltaDiscoveryRequest have these).
type perTypeRequest interface {
	GetTypeUrl() string
	GetNode() *corev3.Node
}

// Send sends r on its type's stream, opening it first if needed: its first
// request carries the node (the attempt sends it only once).
func (p *perTypeStreams[Req, Resp]) Send(r *Req) error {
	req := any(r).(perTypeRequest)
	t := req.GetTypeUrl()
	if n := req.GetNode(); n != nil {
		p.node = n
	}
	s := p.streams[t]
	if s == nil {
		open := p.openers[t]
		if open == nil {
			return fmt.Errorf("%w: %s", ErrNoPerTypeService, t)
		}
		var err error
		if s, err = open(p.conn, p.ctx, p.opts...); err != nil {
			return perTypeError(t, "open per-type stream", err)
		}
		p.streams[t] = s
		p.wg.Add(1)
		go p.recv(t, s)
		if req.GetNode() == nil && p.node != nil {
			setRequestNode(r, p.node)
		}
	}
	if err := s.Send(r); err != nil {
		return perTypeError(t, "per-type stream", err)
	}
	return nil
}

// perTypeError wraps err of the stream of type t: naming t when the origin
// does not serve t's service (the type is refused), else not (refused.go
// would refuse a type for an error all streams share, such as a restart).
func perTypeError(t, what string, err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%s: the origin has no service for %s: %w", what, t, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// setRequestNode sets the node of a DiscoveryRequest or DeltaDiscoveryRequest.
func setRequestNode(r any, n *corev3.Node) {
	switch r := r.(type) {
	case *discoveryv3.DiscoveryRequest:
		r.Node = n
	case *discoveryv3.DeltaDiscoveryRequest:
		r.Node = n
	}
}

// recv forwards what stream s of type t receives until it fails (its error,
// naming t, goes to errc if none is there yet) or the attempt ends.
func (p *perTypeStreams[Req, Resp]) recv(t string, s grpc.BidiStreamingClient[Req, Resp]) {
	defer p.wg.Done()
	for {
		m, err := s.Recv()
		if err != nil {
			select {
			case p.errc <- perTypeError(t, "per-type stream", err):
			default:
			}
			return
		}
		select {
		case p.out <- m:
		case <-p.ctx.Done():
			return
		}
	}
}

// Recv returns the next response of any type, or the first stream error.
func (p *perTypeStreams[Req, Resp]) Recv() (*Resp, error) {
	select {
	case m := <-p.out:
		return m, nil
	case err := <-p.errc:
		return nil, err
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
}

// wait waits for the receivers; the attempt calls it after ending ctx.
func (p *perTypeStreams[Req, Resp]) wait() { p.wg.Wait() }

// CloseSend half-closes every stream.
func (p *perTypeStreams[Req, Resp]) CloseSend() error {
	var errs []error
	for _, s := range p.streams {
		errs = append(errs, s.CloseSend())
	}
	return errors.Join(errs...)
}

func (p *perTypeStreams[Req, Resp]) Context() context.Context { return p.ctx }

// Header and Trailer: several streams have no one header; none is used.
func (p *perTypeStreams[Req, Resp]) Header() (metadata.MD, error) { return nil, nil }
func (p *perTypeStreams[Req, Resp]) Trailer() metadata.MD         { return nil }

func (p *perTypeStreams[Req, Resp]) SendMsg(m any) error {
	r, ok := m.(*Req)
	if !ok {
		return fmt.Errorf("per-type streams: send %T", m)
	}
	return p.Send(r)
}

func (p *perTypeStreams[Req, Resp]) RecvMsg(m any) error {
	return errors.New("per-type streams: RecvMsg is not supported; use Recv")
}
