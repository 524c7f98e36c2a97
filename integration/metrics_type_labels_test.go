package integration

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestInventedTypeLabel: ADS carries any type URL, so a client can make the
// relay subscribe to a type no xDS resource has. The cache and the upstream
// count it under the type label "other", never under the type URL, so no
// client can grow the label set.
func TestInventedTypeLabel(t *testing.T) {
	const invented = "type.googleapis.com/made.up.Type"
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})
	k := cache.Key{Link: cache.LinkID{Authority: "origin"}, TypeURL: invented, Name: "x"}
	w := newWatcher()
	r.c.Watch(w, nil, k) // a miss: pending
	o.next("subscription to x", subscribes(invented, "x"))

	// A type the relay does not know is cached without validation...
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: invented, Nonce: "n1",
		Resources: []*discoveryv3.Resource{{Name: "x", Version: "1", Resource: &anypb.Any{TypeUrl: invented, Value: []byte("x")}}}})
	if ack := o.next("ACK of n1", answers("n1")); ack.GetErrorDetail() != nil {
		t.Fatalf("response NACKed: %v", ack.GetErrorDetail())
	}
	w.waitState(t, r.c, k, cache.StatePresent)
	r.c.Watch(newWatcher(), nil, k) // a hit
	// ... and one whose resource has another type is NACKed.
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: invented, Nonce: "n2",
		Resources: []*discoveryv3.Resource{{Name: "x", Version: "2", Resource: mustAny(t, cluster("x", 1))}}})
	if nack := o.next("NACK of n2", answers("n2")); nack.GetErrorDetail() == nil {
		t.Fatalf("resource of another type ACKed")
	}

	for _, tc := range []struct {
		metric string
		labels []string // besides type
		want   float64
	}{
		{"xds_relay_upstream_responses_total", nil, 2},
		{"xds_relay_upstream_nacks_total", []string{"reason", "invalid"}, 1},
		{"xds_relay_cache_misses_total", nil, 1},
		{"xds_relay_cache_hits_total", nil, 1},
	} {
		if got := metricValue(t, r, tc.metric, append([]string{"type", "other"}, tc.labels...)...); got != tc.want {
			t.Errorf("%s{type=\"other\"} = %v, want %v", tc.metric, got, tc.want)
		}
	}
	mfs, err := relayRegistry(t, r.Relay).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), "made.up") {
					t.Errorf("%s has label %s=%q", mf.GetName(), lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}
