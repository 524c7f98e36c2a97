package integration

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TestCrossVariant: delta clients behind a SotW upstream and SotW clients
// behind a delta upstream, end to end against a go-control-plane origin:
// each gets the resources (by name and by glob), an origin change, and a
// deletion where SotW can express one: a Cluster the origin deletes
// reaches a delta client as removed_resources and leaves a SotW client's
// Cluster state. (SotW has no deletion for other types: an endpoint
// deleted over a SotW upstream is not followed.)
func TestCrossVariant(t *testing.T) {
	for _, tc := range []struct {
		name, upstream, client string
	}{
		{"delta clients, sotw upstream", xdstype.TransportSotW, "delta"},
		{"sotw clients, delta upstream", xdstype.TransportDelta, "sotw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newGCPOrigin(t)
			cname := func(id string) string { return xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", id) }
			c1, c2, g1 := cname("named/c1"), cname("named/c2"), cname("svc/g1")
			g2 := cname("svc/g2")
			cla := xdstpName(dsAuthority, "envoy.config.endpoint.v3.ClusterLoadAssignment", "e1")
			o.setAll(resource.ClusterType, map[string]types.Resource{
				c1: cluster(c1, 1), c2: cluster(c2, 1), g1: cluster(g1, 1), g2: cluster(g2, 1),
			})
			o.set(resource.EndpointType, cla, &endpointv3.ClusterLoadAssignment{ClusterName: cla})
			r := startRelay(t, func(c *config.Config) {
				c.Log.Level = config.LogInfo
				c.Authorities[0].Transport = tc.upstream
			}, o.addr)
			conn := dial(t, r.XDSAddr())
			named := newADSClient(t, conn, tc.client, "named", "x", nil)
			named.subscribe(resource.ClusterType, c1, c2)
			named.waitHolds(resource.ClusterType, c1, c2)
			named.subscribe(resource.EndpointType, cla)
			named.waitHolds(resource.EndpointType, cla)
			globbed := newADSClient(t, conn, tc.client, "globbed", "x", nil)
			globbed.subscribe(resource.ClusterType, cname("svc/*"))
			globbed.waitHolds(resource.ClusterType, g1, g2)

			o.set(resource.ClusterType, c1, cluster(c1, 5))
			named.waitTimeout(c1, 5)
			o.set(resource.ClusterType, g1, cluster(g1, 5))
			globbed.waitTimeout(g1, 5)

			o.del(resource.ClusterType, c2)
			named.waitHolds(resource.ClusterType, c1)
			o.del(resource.ClusterType, g2)
			globbed.waitHolds(resource.ClusterType, g1)
		})
	}
}
