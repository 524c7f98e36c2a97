package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// nameGroupRules is the rule migrate-rules writes for the earlier relay's
// resource-name grouping (docs/migrating-from-xds-relay.md,
// routeconfiguration-2): one group, so one upstream link and origin
// stream, per node cluster and route name.
const nameGroupRules = `
- name: routeconfiguration-2
  match:
    type_urls:
      - type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  result:
    authority: ds.example
    group:
      - literal: 'legacy:'
      - rewrite:
          from: node.cluster
          regex: ^([a-z]+)-[0-9a-z]+$
          replace: ${1}
        refuse_empty: true
      - literal: _routes_
      - rewrite:
          from: resource_name
          regex: (?s).*
          replace: $0
        refuse_empty: true
`

// TestGroupLimits (issue #26): under the rule above, one stream
// subscribing 400 route names used to open 400 origin streams. Now a
// stream may cause at most downstream.limits.max_new_groups_per_stream
// (16) groups to open, and an authority may have at most
// max_groups_per_authority (24 here) links: past either the stream ends
// with RESOURCE_EXHAUSTED naming the limit, counted. The origin never sees
// more streams than the authority's limit, clients of groups that exist
// are served, and updates keep reaching them.
func TestGroupLimits(t *testing.T) {
	const perAuthority = 24
	o := newGCPOrigin(t)
	names := make([]string, 400)
	routes := map[string]types.Resource{}
	for i := range names {
		names[i] = fmt.Sprintf("route-%03d", i)
		routes[names[i]] = &routev3.RouteConfiguration{Name: names[i]}
	}
	o.setAll(resource.RouteType, routes)
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Aggregation.Rules = decodeAggRules(t, nameGroupRules)
		c.Authorities[0].PlainNames = new(false)
		c.Downstream.Limits.MaxGroupsPerAuthority = perAuthority // max_new_groups_per_stream: its default, 16
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	refused := func(c *adsClient, limit string) {
		t.Helper()
		st := c.delta.Err()
		if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "downstream.limits."+limit) {
			t.Fatalf("%s: status %v, want RESOURCE_EXHAUSTED naming downstream.limits.%s", c.name, st, limit)
		}
	}

	hostile := newADSClient(t, conn, "delta", "hostile", "payments-1", nil)
	hostile.subscribe(resource.RouteType, names...)
	refused(hostile, "max_new_groups_per_stream")

	// Clients of two clusters open 16 + 8 groups: the authority's limit.
	orders := newADSClient(t, conn, "delta", "orders", "orders-1", nil)
	orders.subscribe(resource.RouteType, names[:16]...)
	orders.waitHolds(resource.RouteType, names[:16]...)
	users := newADSClient(t, conn, "sotw", "users", "users-1", nil)
	users.subscribe(resource.RouteType, names[:8]...)
	users.waitHolds(resource.RouteType, names[:8]...)
	billing := newADSClient(t, conn, "delta", "billing", "billing-1", nil)
	billing.subscribe(resource.RouteType, names[0])
	refused(billing, "max_groups_per_authority")

	// A client of groups that exist is served; updates reach every one.
	orders2 := newADSClient(t, conn, "sotw", "orders-2", "orders-2", nil)
	orders2.subscribe(resource.RouteType, names[3])
	orders2.waitHolds(resource.RouteType, names[3])
	before := orders.versions(resource.RouteType)[names[3]]
	o.set(resource.RouteType, names[3], &routev3.RouteConfiguration{Name: names[3], VirtualHosts: []*routev3.VirtualHost{{Name: "v2", Domains: []string{"*"}}}})
	for _, c := range []*adsClient{orders, orders2} {
		waitVersionChange(t, c, resource.RouteType, names[3], before)
	}

	if d, s := o.streams(); d+s > perAuthority {
		t.Errorf("the origin saw %d streams, over the authority's limit of %d", d+s, perAuthority)
	}
	for limit, want := range map[string]float64{"new_groups_per_stream": 1, "groups_per_authority": 1} {
		if got := relayMetric(t, r, "xds_relay_downstream_limit_rejections_total", "limit", limit); got != want {
			t.Errorf("xds_relay_downstream_limit_rejections_total{limit=%q} = %v, want %v", limit, got, want)
		}
	}
}

// waitVersionChange receives (and ACKs) until c holds a version of name
// other than old.
func waitVersionChange(t *testing.T, c *adsClient, typeURL, name, old string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	for c.versions(typeURL)[name] == old {
		if _, ok := c.recvOne(ctx.Done()); !ok {
			t.Fatalf("%s still holds %s at version %s after %v", c.name, name, old, xdstest.WaitTimeout)
		}
	}
}
