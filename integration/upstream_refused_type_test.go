package integration

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestOriginRefusesAType: a client subscribes to a valid name of a type
// the origin does not serve (go-control-plane ends the whole ADS stream:
// "no cache defined for type_url"). The relay stops asking the origin for
// that type, answers the name as does-not-exist, and every other
// subscription keeps its stream: an update of another type reaches the
// client at once and the origin is not reconnected to in a loop.
func TestOriginRefusesAType(t *testing.T) {
	o := newGCPOrigin(t)
	c := dsCluster("kept")
	o.set(resource.ClusterType, c, cluster(c, 1))
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	v := subscribeClusters(t, d, c)

	scoped := "xdstp://" + dsAuthority + "/envoy.config.route.v3.ScopedRouteConfiguration/s"
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ScopedRouteType, ResourceNamesSubscribe: []string{scoped}})
	got := d.Recv()
	if got.GetTypeUrl() != resource.ScopedRouteType || len(got.GetRemovedResources()) != 1 || got.GetRemovedResources()[0] != scoped {
		t.Fatalf("answer to the refused type: %v, want %s in removed_resources", got, scoped)
	}
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: got.GetTypeUrl(), ResponseNonce: got.GetNonce()})
	if n := relayMetric(t, r, "xds_relay_upstream_refused_types_total", "type", "envoy.config.route.v3.ScopedRouteConfiguration"); n != 1 {
		t.Errorf("refused_types_total = %v, want 1", n)
	}

	// The rest of the link is whole: an update arrives, and the origin
	// sees no reconnect loop.
	o.set(resource.ClusterType, c, cluster(c, 2))
	recvDelta(t, d, v, func() bool { return timeoutOf(v, c) == 2 })
	// Counted only now: the refusal ended the origin's stream, and the
	// one reconnect it takes may reach the origin after the client's
	// answer; the update above came through it.
	before, _ := o.streams()
	quiet := time.NewTimer(xdstest.QuietPeriod)
	<-quiet.C // what must not happen: more streams opened meanwhile
	if after, _ := o.streams(); after != before {
		t.Errorf("origin saw %d more streams after the link was whole again, want 0 (a reconnect loop)", after-before)
	}
}
