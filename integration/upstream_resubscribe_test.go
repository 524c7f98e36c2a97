package integration

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
)

// TestResubscribeAnswered: with cache.max_resources 0 an unsubscribed name
// is evicted (and unsubscribed upstream) at once; subscribing it again
// right away, before the relay's link has synced, must still end with the
// resource delivered. Before the fix the unsubscribe and subscribe
// cancelled out upstream, the origin never resent, and by the 11th-13th
// try a resubscription went unanswered.
func TestResubscribeAnswered(t *testing.T) {
	o := newGCPOrigin(t)
	x := dsCluster("resub")
	o.set(resource.ClusterType, x, cluster(x, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Cache.MaxResources = 0
	}, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	v := subscribeClusters(t, d, x)
	for range 30 {
		d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesUnsubscribe: []string{x}})
		delete(v, x)
		d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{x}})
		recvDelta(t, d, v, has(v, x)) // fails if the resubscription is never answered
	}
}
