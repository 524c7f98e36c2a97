package csds

import (
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/internal/downstream"
)

// BenchmarkResponse measures turning a report of 1000 clients (the
// response bound) with 10 resources each into the response and encoding
// it; bytes/op in the output is the encoded size.
func BenchmarkResponse(b *testing.B) {
	const clients, each = DefaultMaxClients, 10
	rep := downstream.StatusReport{Matched: clients}
	for i := range clients {
		c := downstream.ClientStatus{ID: uint64(i), Variant: "delta", Stream: "ads", Node: &corev3.Node{Id: fmt.Sprintf("envoy-%d", i), Cluster: "fleet"}}
		for j := range each {
			c.Resources = append(c.Resources, downstream.ResourceStatus{TypeURL: clusterType,
				Name:    fmt.Sprintf("xdstp://auth.example/envoy.config.cluster.v3.Cluster/service-%d", j),
				Version: "ca9858017639d534aee6dd1e35d53163e73efe0f61d4f9ccbbd930a0cd8bb993", Updated: time.Now(), State: downstream.ResourceAcked})
		}
		rep.Clients = append(rep.Clients, c)
	}
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out, err := proto.Marshal(response(rep))
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "response_bytes")
}
