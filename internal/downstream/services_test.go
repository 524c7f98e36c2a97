package downstream

import (
	"context"
	"testing"

	clusterv3s "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointv3s "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionv3s "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerv3s "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routev3s "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimev3s "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretv3s "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
)

type (
	sotwOpen  = func(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error)
	deltaOpen = func(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error)
)

// Every per-type service serves its type, SotW and delta, with the
// request's type_url left empty as the per-type protocol allows.
func TestPerTypeServices(t *testing.T) {
	e := newEnv(t, 0)
	tests := []struct {
		name    string
		typeURL string
		sotw    sotwOpen // nil: no SotW variant (VHDS)
		delta   deltaOpen
	}{
		{"LDS", resourcev3.ListenerType, listenerv3s.NewListenerDiscoveryServiceClient(e.conn).StreamListeners, listenerv3s.NewListenerDiscoveryServiceClient(e.conn).DeltaListeners},
		{"RDS", resourcev3.RouteType, routev3s.NewRouteDiscoveryServiceClient(e.conn).StreamRoutes, routev3s.NewRouteDiscoveryServiceClient(e.conn).DeltaRoutes},
		{"SRDS", resourcev3.ScopedRouteType, routev3s.NewScopedRoutesDiscoveryServiceClient(e.conn).StreamScopedRoutes, routev3s.NewScopedRoutesDiscoveryServiceClient(e.conn).DeltaScopedRoutes},
		{"VHDS", resourcev3.VirtualHostType, nil, routev3s.NewVirtualHostDiscoveryServiceClient(e.conn).DeltaVirtualHosts},
		{"CDS", resourcev3.ClusterType, clusterv3s.NewClusterDiscoveryServiceClient(e.conn).StreamClusters, clusterv3s.NewClusterDiscoveryServiceClient(e.conn).DeltaClusters},
		{"EDS", resourcev3.EndpointType, endpointv3s.NewEndpointDiscoveryServiceClient(e.conn).StreamEndpoints, endpointv3s.NewEndpointDiscoveryServiceClient(e.conn).DeltaEndpoints},
		{"SDS", resourcev3.SecretType, secretv3s.NewSecretDiscoveryServiceClient(e.conn).StreamSecrets, secretv3s.NewSecretDiscoveryServiceClient(e.conn).DeltaSecrets},
		{"RTDS", resourcev3.RuntimeType, runtimev3s.NewRuntimeDiscoveryServiceClient(e.conn).StreamRuntime, runtimev3s.NewRuntimeDiscoveryServiceClient(e.conn).DeltaRuntime},
		{"ECDS", resourcev3.ExtensionConfigType, extensionv3s.NewExtensionConfigDiscoveryServiceClient(e.conn).StreamExtensionConfigs, extensionv3s.NewExtensionConfigDiscoveryServiceClient(e.conn).DeltaExtensionConfigs},
	}
	for _, tc := range tests {
		n := xdstp(tc.typeURL, "r")
		r1 := e.put(tc.typeURL, n, "1")
		if tc.sotw != nil {
			t.Run(tc.name+"/sotw", func(t *testing.T) {
				c := startStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
					return tc.sotw(ctx)
				})
				c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, ResourceNames: []string{n}})
				checkSotW(t, sotwResp(tc.typeURL, "1", r1.Body), c.Recv())
			})
		}
		t.Run(tc.name+"/delta", func(t *testing.T) {
			c := startStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
				return tc.delta(ctx)
			})
			c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, ResourceNamesSubscribe: []string{n}})
			checkDelta(t, deltaResp(tc.typeURL, nil, dres(n, r1)), c.Recv())
		})
	}
}
