package downstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestClientCounts: open streams are counted by variant and by the types
// they requested, and uncounted when they end.
func TestClientCounts(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "e1")
	e.put(edsType, n, "1")
	d1, d2, s1 := e.delta(), e.delta(), e.sotw()
	for _, c := range []*deltaStreamC{d1, d2} {
		c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
		c.Recv()
	}
	e.syncDelta(d2) // d2 also requested Secrets
	s1.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: []string{n}})
	s1.Recv()
	want := ClientCounts{
		Streams: map[string]int64{"sotw": 1, "delta": 2}, Total: 3,
		ByType: []TypeCount{
			{Type: "envoy.config.endpoint.v3.ClusterLoadAssignment", SotW: 1, Delta: 2},
			{Type: "envoy.extensions.transport_sockets.tls.v3.Secret", Delta: 1},
		},
	}
	if d := cmp.Diff(want, e.srv.ClientCounts()); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}

	d2.Send(&discoveryv3.DeltaDiscoveryRequest{}) // no type_url: the relay ends the stream
	xdstest.Poll(t, "after a stream ended", func() error {
		if c := e.srv.ClientCounts(); c.Total != 2 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	want = ClientCounts{
		Streams: map[string]int64{"sotw": 1, "delta": 1}, Total: 2,
		ByType: []TypeCount{{Type: "envoy.config.endpoint.v3.ClusterLoadAssignment", SotW: 1, Delta: 1}},
	}
	if d := cmp.Diff(want, e.srv.ClientCounts()); d != "" {
		t.Errorf("counts after one ended (-want +got):\n%s", d)
	}
}

// TestRecentNacks: NACKs are kept newest first, at most RecentNacks of
// them, with every client string cut to maxClientText bytes; the total
// counts them all; /debug/nacks serves them.
func TestRecentNacks(t *testing.T) {
	e := newEnv(t, 0)
	n := xdstp(edsType, "e1")
	e.put(edsType, n, "1")
	c := e.delta()
	longID := strings.Repeat("n", 1000)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: longID, Cluster: "c1"}, TypeUrl: edsType, ResourceNamesSubscribe: []string{n}})
	got := c.Recv()
	const sent = RecentNacks + 5
	for i := range sent {
		msg := fmt.Sprintf("bad endpoint %d", i)
		if i == sent-1 {
			msg = strings.Repeat("x", 5000)
		}
		c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: got.GetNonce(), ErrorDetail: &rpcstatus.Status{Code: 3, Message: msg}})
	}
	e.syncDelta(c) // every NACK before it was handled

	recent, total := e.srv.Nacks()
	if total != sent || len(recent) != RecentNacks {
		t.Fatalf("total %d, kept %d; want %d, %d", total, len(recent), sent, RecentNacks)
	}
	newest := recent[0]
	if !strings.HasPrefix(newest.ErrorDetail, strings.Repeat("x", maxClientText)+"…(5000 bytes)") || len(newest.ErrorDetail) > maxClientText+32 {
		t.Errorf("newest error detail not cut to %d bytes: %d bytes", maxClientText, len(newest.ErrorDetail))
	}
	if len(newest.NodeID) > maxClientText+32 || newest.Variant != "delta" || newest.TypeURL != edsType || newest.Nonce != got.GetNonce() || newest.ErrorCode != 3 {
		t.Errorf("newest NACK %+v", newest)
	}
	if recent[1].ErrorDetail != fmt.Sprintf("bad endpoint %d", sent-2) || recent[RecentNacks-1].ErrorDetail != fmt.Sprintf("bad endpoint %d", sent-RecentNacks) {
		t.Errorf("order: second %q, oldest kept %q", recent[1].ErrorDetail, recent[RecentNacks-1].ErrorDetail)
	}

	// As /debug/nacks shows it (internal/admin serves NacksPage as JSON).
	body, err := json.Marshal(e.srv.NacksPage())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"total":55`) || !strings.Contains(string(body), "bad endpoint 53") {
		t.Errorf("/debug/nacks: body starts %.300q", body)
	}
}
