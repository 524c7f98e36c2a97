package delivery

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// BenchmarkValidate is the cost of validating one new version, as the
// cache asks (Delivery.Validate: decode the Any, ValidateAll), for a
// typical resource of each of the four main types. Reported in
// docs/delivery.md.
func BenchmarkValidate(b *testing.B) {
	for _, tc := range []struct {
		name string
		m    proto.Message
	}{
		{"Cluster", benchCluster()},
		{"ClusterLoadAssignment_10_endpoints", benchCLA(10)},
		{"Listener_HCM", benchListener(b)},
		{"RouteConfiguration_10_routes", benchRoutes(10)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body, err := anypb.New(tc.m)
			if err != nil {
				b.Fatal(err)
			}
			cfgd := newBenchDelivery()
			r := &cache.Resource{Name: "r", Body: body, Version: cache.ContentVersion(body)}
			k := cache.Key{Link: link, TypeURL: body.GetTypeUrl(), Name: "r"}
			if err := cfgd.Validate(k, r); err != nil {
				b.Fatalf("a valid %s: %v", tc.name, err)
			}
			b.SetBytes(int64(len(body.GetValue())))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_ = cfgd.Validate(k, r)
			}
		})
	}
}

func newBenchDelivery() *Delivery {
	cfg := config.Default()
	cfg.Authorities = []config.Authority{{Name: auth, Origins: []string{"127.0.0.1:1"}}}
	return New(Options{Config: cfg})
}

func benchCluster() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 "service-a",
		ConnectTimeout:       durationpb.New(5 * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
		LbPolicy: clusterv3.Cluster_LEAST_REQUEST,
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			MaxConnections: wrapperspb.UInt32(1024), MaxPendingRequests: wrapperspb.UInt32(1024), MaxRequests: wrapperspb.UInt32(4096),
		}}},
		HealthChecks: []*corev3.HealthCheck{{
			Timeout: durationpb.New(time.Second), Interval: durationpb.New(10 * time.Second),
			UnhealthyThreshold: wrapperspb.UInt32(3), HealthyThreshold: wrapperspb.UInt32(2),
			HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: "/healthz"}},
		}},
		OutlierDetection: &clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(5), BaseEjectionTime: durationpb.New(30 * time.Second)},
	}
}

func benchCLA(n int) *endpointv3.ClusterLoadAssignment {
	loc := &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Region: "region-1", Zone: "zone-a"}}
	for i := range n {
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
				}}},
			}},
			HealthStatus:        corev3.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(100),
			Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": {Fields: map[string]*structpb.Value{
				"canary": structpb.NewBoolValue(i%10 == 0)}}}},
		})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: "service-a", Endpoints: []*endpointv3.LocalityLbEndpoints{loc}}
}

func benchListener(b *testing.B) *listenerv3.Listener {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		b.Fatal(err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: "ingress_http",
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: "local_route",
			ConfigSource: &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return &listenerv3.Listener{
		Name: "listener_0",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 10000}}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}
}

func benchRoutes(n int) *routev3.RouteConfiguration {
	vh := &routev3.VirtualHost{Name: "backend", Domains: []string{"*"}}
	for i := range n {
		vh.Routes = append(vh.Routes, &routev3.Route{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: fmt.Sprintf("/api/v%d/", i)}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: fmt.Sprintf("service-%d", i)},
				Timeout:          durationpb.New(15 * time.Second),
			}},
		})
	}
	return &routev3.RouteConfiguration{Name: "local_route", VirtualHosts: []*routev3.VirtualHost{vh}}
}
