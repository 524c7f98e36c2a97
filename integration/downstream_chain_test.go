package integration

import (
	"fmt"
	"net"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// chain is a Listener → RouteConfiguration → Cluster (EDS) →
// ClusterLoadAssignment chain under xdstp names, as grpc-go's xDS client
// resolves "xds:///<service>" (api_listener, RDS and EDS over ADS).
type chain struct {
	listenerName, routeName, clusterName, claName string
	listener                                      *listenerv3.Listener
	route                                         *routev3.RouteConfiguration
	cluster                                       *clusterv3.Cluster
	cla                                           *endpointv3.ClusterLoadAssignment
}

func xdstpName(authority, typ, id string) string {
	return fmt.Sprintf("xdstp://%s/%s/%s", authority, typ, id)
}

func newChain(authority, service, backend string) (*chain, error) {
	return buildChain(&chain{
		listenerName: xdstpName(authority, "envoy.config.listener.v3.Listener", service),
		routeName:    xdstpName(authority, "envoy.config.route.v3.RouteConfiguration", service),
		clusterName:  xdstpName(authority, "envoy.config.cluster.v3.Cluster", service),
		claName:      xdstpName(authority, "envoy.config.endpoint.v3.ClusterLoadAssignment", service),
	}, service, backend)
}

// newPlainChain is newChain under plain names, each resource named service,
// as an Envoy fleet's origin serves them (RDS by route name, EDS by cluster
// name) and grpc-go resolves "xds:///<service>" without xdstp templates.
func newPlainChain(service, backend string) (*chain, error) {
	return buildChain(&chain{listenerName: service, routeName: service, clusterName: service, claName: service}, service, backend)
}

// buildChain fills in c's resources under its names.
func buildChain(c *chain, service, backend string) (*chain, error) {
	host, portStr, err := net.SplitHostPort(backend)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: ads, RouteConfigName: c.routeName}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, err
	}
	c.listener = &listenerv3.Listener{Name: c.listenerName, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}}
	c.route = &routev3.RouteConfiguration{
		Name: c.routeName,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    service,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: c.clusterName}}},
			}},
		}},
	}
	c.cluster = &clusterv3.Cluster{
		Name:                 c.clusterName,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads, ServiceName: c.claName},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
	c.cla = &endpointv3.ClusterLoadAssignment{
		ClusterName: c.claName,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Region: "r", Zone: "z"},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address:       host,
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
					}}},
				}},
				LoadBalancingWeight: wrapperspb.UInt32(1),
			}},
		}},
	}
	return c, nil
}
