package cache_test

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/delivery"
)

// BenchmarkFanoutDelivery is BenchmarkFanout's update (one changed
// resource, 10000 watchers) with safe delivery off and on (the relay's
// defaults: the new version validated, the update screened for removals,
// its rollout begun: the last accepted version kept beside it, the NACK
// breaker's record of it): what delivery adds to one origin change, the
// same whatever the number of watchers. The resource is a
// ClusterLoadAssignment of 10 endpoints.
func BenchmarkFanoutDelivery(b *testing.B) {
	const watchers = 10000
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("watchers=%d/delivery=%v", watchers, on), func(b *testing.B) {
			opts := cache.Options{MaxResources: 100, MaxBytes: 1 << 30,
				Upstream: nopSubscriber{}, Logger: zap.NewNop(), Registry: prometheus.NewRegistry()}
			if on {
				cfg := config.Default()
				cfg.Authorities = []config.Authority{{Name: "bench.local", Origins: []string{"127.0.0.1:1"}}}
				d := delivery.New(delivery.Options{Config: cfg})
				opts.Validator, opts.Guard, opts.Gate = d, d, d
			}
			c := cache.New(opts)
			if on {
				opts.Gate.(*delivery.Delivery).SetCache(c)
			}
			stream := cache.LinkID{Authority: "bench.local"}
			k := cache.Key{Link: stream, TypeURL: resourcev3.EndpointType, Name: "cla"}
			for range watchers {
				c.Watch(&countingWatcher{}, nil, k)
			}
			bodies := []*anypb.Any{benchCLA(b, 8080), benchCLA(b, 9090)} // every Apply a change
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got := c.Apply(cache.Update{Link: stream, TypeURL: resourcev3.EndpointType, Resources: []*cache.Resource{
					{Name: "cla", Body: bodies[i%2]},
				}})
				if len(got.Refused) > 0 {
					b.Fatalf("refused: %v", got.Refused)
				}
			}
		})
	}
}

// benchCLA is a ClusterLoadAssignment of 10 endpoints on port.
func benchCLA(b *testing.B, port uint32) *anypb.Any {
	loc := &endpointv3.LocalityLbEndpoints{}
	for i := range 10 {
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: fmt.Sprintf("10.0.0.%d", i+1), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}})
	}
	a, err := anypb.New(&endpointv3.ClusterLoadAssignment{ClusterName: "cla", Endpoints: []*endpointv3.LocalityLbEndpoints{loc}})
	if err != nil {
		b.Fatal(err)
	}
	return a
}
