package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xds-relay/xds-relay/internal/loadgen"
)

// Name schemes (--names).
const (
	// namesXDSTP: xdstp://AUTHORITY/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-NNNN,
	// one authority, so the relay serves them all on one upstream stream.
	namesXDSTP = "xdstp"
	// namesPlain: cla-NNNN, as an Envoy names its clusters' endpoints; the
	// relay serves them through its plain-names authority, one upstream
	// stream per node cluster of its clients.
	namesPlain = "plain"
)

// resourceName is the name of the i-th ClusterLoadAssignment in scheme.
func resourceName(scheme, authority string, i int) string {
	if scheme == namesPlain {
		return fmt.Sprintf("cla-%04d", i)
	}
	return fmt.Sprintf("xdstp://%s/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-%04d", authority, i)
}

// deploySeed seeds every deploy set: the same run of pushes changes the
// same resources in every scenario, direct and relayed alike.
const deploySeed = 0xde9107

// deploySet returns, in increasing order, the indices of the k of r
// resources that the seq-th push of a count (from 0) changes: a seeded
// random set, spread over all r, so that many clients' windows hold one or
// two changed names and many hold none.
func deploySet(r, k int, seq uint64) []int {
	rng := rand.New(rand.NewPCG(deploySeed, seq))
	idx := rng.Perm(r)[:k]
	slices.Sort(idx)
	return idx
}

// buildCLA returns a ClusterLoadAssignment of at least size bytes: endpoints
// with addresses, weights and metadata, as a service with a few dozen hosts
// looks. rev makes each revision's endpoints differ; a non-zero pushed is
// embedded as a loadgen push stamp.
func buildCLA(name string, size, rev int, pushed time.Time) *endpointv3.ClusterLoadAssignment {
	stamp := "initial"
	if !pushed.IsZero() {
		stamp = loadgen.Stamp(pushed)
	}
	cla := &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality: &corev3.Locality{Region: "bench-region", Zone: "bench-zone-a"},
		}},
	}
	loc := cla.Endpoints[0]
	for i := 0; len(loc.LbEndpoints) == 0 || proto.Size(cla) < size; i++ {
		md := map[string]*structpb.Value{"canary": structpb.NewBoolValue(i%10 == 0)}
		if i == 0 {
			md["push"] = structpb.NewStringValue(stamp)
		}
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address:       fmt.Sprintf("10.%d.%d.%d", rev%250, i/250, i%250+1),
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
				}}},
			}},
			HealthStatus:        corev3.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(100),
			Metadata:            &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": {Fields: md}}},
		})
	}
	return cla
}
