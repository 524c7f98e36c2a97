package integration

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xds-relay/xds-relay/config"
)

// TestResponsesWithinSendLimit (issue #26): an origin answers many big
// resources in pieces (the relay asks for them in several requests:
// upstream.max_request_size), each piece within every limit, and a client
// with the gather window on subscribes to all of them at once. The
// gathered answer is larger than downstream.max_send_msg_size: the client
// gets every name across several responses, none over the limit, both
// cold (the relay asks the origin) and warm (the relay holds them), over
// both variants. The limit is 1 MiB here, the resources 100 KiB, to keep
// the test light; the issue saw 150 × 10 MiB against the 64 MiB default.
func TestResponsesWithinSendLimit(t *testing.T) {
	const n, size, limit = 30, 100 << 10, 1 << 20 // 3 MB in all
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			o := newGCPOrigin(t)
			names := endpointNames("big", n)
			rs := map[string]types.Resource{}
			for _, name := range names {
				rs[name] = bigCLA(name, size)
			}
			o.setAll(resource.EndpointType, rs)
			r := startRelay(t, func(cfg *config.Config) {
				cfg.Log.Level = config.LogInfo
				cfg.Downstream.MaxSendMsgSize = limit
				cfg.Upstream.MaxRequestSize = 1 << 10 // about ten names a request: pieces
			}, o.addr)
			conn := dial(t, r.XDSAddr())
			for _, when := range []string{"cold", "warm"} {
				responses := recvWithinLimit(t, conn, variant, names, limit)
				if responses < 3 {
					t.Errorf("%s: %d names of %d KiB under a %d KiB limit came in %d responses, want at least 3",
						when, n, size>>10, limit>>10, responses)
				}
			}
			if got := relayMetric(t, r, "xds_relay_downstream_split_responses_total", "type", "envoy.config.endpoint.v3.ClusterLoadAssignment"); got < 2 {
				t.Errorf("xds_relay_downstream_split_responses_total = %v, want at least 2 (cold and warm)", got)
			}
		})
	}
}

// bigCLA is a ClusterLoadAssignment named name of about size bytes.
func bigCLA(name string, size int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{
		{Locality: &corev3.Locality{Region: strings.Repeat("r", size)}},
	}}
}

// recvWithinLimit opens a client of variant on conn that subscribes to
// names at once, receives (and ACKs) until it holds every one, checking
// that no response is over limit bytes, and returns how many responses
// that took. Its stream ending fails the test.
func recvWithinLimit(t *testing.T, conn *grpc.ClientConn, variant string, names []string, limit int) int {
	t.Helper()
	held := map[string]bool{}
	responses := 0
	check := func(m proto.Message) {
		t.Helper()
		responses++
		if s := proto.Size(m); s > limit {
			t.Fatalf("a response of %d bytes, over the %d-byte limit", s, limit)
		}
	}
	if variant == "delta" {
		d := openDelta(t, conn)
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names})
		for len(held) < len(names) {
			resp := d.Recv()
			check(resp)
			for _, x := range resp.GetResources() {
				held[x.GetName()] = true
			}
			d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: resp.GetNonce()})
		}
		return responses
	}
	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: testNodeDS, TypeUrl: resource.EndpointType, ResourceNames: names})
	for len(held) < len(names) {
		resp := s.Recv()
		check(resp)
		for _, a := range resp.GetResources() {
			held[resourceName(t, a)] = true
		}
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointType, VersionInfo: resp.GetVersionInfo(),
			ResponseNonce: resp.GetNonce(), ResourceNames: names})
	}
	return responses
}
