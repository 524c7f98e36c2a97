package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Tiered relays: client → edge relay → central relay → origin. The
// central relay is the edges' origin; each hop is one upstream stream per
// authority, whatever the number of clients below it.

const tierAuthority = "tier.example"

func tierCluster(id string) string {
	return xdstpName(tierAuthority, "envoy.config.cluster.v3.Cluster", id)
}

// centralRelay runs a relay in front of origin o (delta; go-control-plane
// has no glob support, so globs are emulated there); edits, in order,
// adjust its config after that.
func centralRelay(t *testing.T, o *gcpOrigin, edits ...func(*config.Config)) *relayproc.Relay {
	t.Helper()
	return startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Authorities = []config.Authority{{Name: tierAuthority, Origins: []string{o.addr},
			Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated}}
		for _, edit := range edits {
			edit(c)
		}
	})
}

// edgeRelay runs a relay whose origin is the relay at central, over
// transport; the central relay understands globs: native.
func edgeRelay(t *testing.T, central, transport string) *relayproc.Relay {
	t.Helper()
	return startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Authorities = []config.Authority{{Name: tierAuthority, Origins: []string{central},
			Transport: transport, GlobCollections: config.GlobNative}}
	})
}

// timeoutSeconds is the connect timeout a client holds for cluster name;
// -1 when it holds none.
func (c *adsClient) timeoutSeconds(name string) int64 {
	return timeoutOf(c.heldFor(resource.ClusterType), name)
}

// waitTimeout receives until the client holds cluster name with timeout
// sec.
func (c *adsClient) waitTimeout(name string, sec int64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	for c.timeoutSeconds(name) != sec {
		if _, ok := c.recvOne(ctx.Done()); !ok {
			c.t.Fatalf("%s holds %s with timeout %d after %v, want %d", c.name, name, c.timeoutSeconds(name), xdstest.WaitTimeout, sec)
		}
	}
}

// TestTieredRelaysGlobs: two edge relays of 50 clients each (delta and
// SotW clients alike) subscribe to a glob through a central relay, over a
// delta and over a SotW hop. The go-control-plane origin sees exactly one
// stream; every client gets the glob's members, then an origin change and
// a deletion (a delta client in removed_resources, a SotW client by its
// absence from the Cluster state).
func TestTieredRelaysGlobs(t *testing.T) {
	for _, hop := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(hop, func(t *testing.T) {
			o := newGCPOrigin(t)
			c0, c1, c2 := tierCluster("svc/c0"), tierCluster("svc/c1"), tierCluster("svc/c2")
			o.setAll(resource.ClusterType, map[string]types.Resource{
				c0: cluster(c0, 1), c1: cluster(c1, 1), c2: cluster(c2, 1),
				tierCluster("other/x"): cluster(tierCluster("other/x"), 1),
			})
			central := centralRelay(t, o)
			glob := tierCluster("svc/*")
			const perEdge = 50
			var clients []*adsClient
			for e := range 2 {
				edge := edgeRelay(t, central.XDSAddr(), hop)
				conn := dial(t, edge.XDSAddr())
				for i := range perEdge {
					variant := "delta"
					if i%2 == 1 {
						variant = "sotw"
					}
					c := newADSClient(t, conn, variant, fmt.Sprintf("edge%d-%s-%d", e, variant, i), "tier", nil)
					c.subscribe(resource.ClusterType, glob)
					clients = append(clients, c)
				}
			}
			for _, c := range clients {
				c.waitHolds(resource.ClusterType, c0, c1, c2)
			}

			start := time.Now()
			o.set(resource.ClusterType, c1, cluster(c1, 7))
			for _, c := range clients {
				c.waitTimeout(c1, 7)
			}
			t.Logf("one origin change reached %d clients across two %s hops in %v", len(clients), hop, time.Since(start))

			o.del(resource.ClusterType, c2)
			for _, c := range clients {
				c.waitHolds(resource.ClusterType, c0, c1)
			}
			o.mu.Lock()
			delta, sotw := o.deltaOpens, o.sotwOpens
			o.mu.Unlock()
			if delta != 1 || sotw != 0 {
				t.Errorf("origin saw %d delta and %d SotW streams, want 1 delta stream for %d clients", delta, sotw, len(clients))
			}
			if got := relayMetric(t, central, "xds_relay_upstream_streams", "authority", tierAuthority); got != 1 {
				t.Errorf("central relay's upstream streams = %v, want 1", got)
			}
		})
	}
}

// TestTierCostPerHop measures what a hop costs: the time for one origin
// change to reach 100 clients through 0 hops (clients on the origin), 1
// (a relay) and 2 (edge and central relay, over a delta or a SotW hop),
// and the streams the origin serves. It asserts that every client gets
// every change and that behind a relay the origin serves one stream; the
// times are logged (go test -v -run TestTierCostPerHop ./integration/),
// not asserted.
func TestTierCostPerHop(t *testing.T) {
	const clients, changes = 100, 5
	for _, tc := range []struct {
		name string
		hops int
		hop  string // the edge → central transport, with 2 hops
	}{
		{"0 hops", 0, ""},
		{"1 hop", 1, ""},
		{"2 hops, delta", 2, xdstype.TransportDelta},
		{"2 hops, sotw", 2, xdstype.TransportSotW},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newGCPOrigin(t)
			name := tierCluster("cost/c")
			o.set(resource.ClusterType, name, cluster(name, 1))
			addr := o.addr
			if tc.hops >= 1 {
				addr = centralRelay(t, o).XDSAddr()
			}
			if tc.hops == 2 {
				addr = edgeRelay(t, addr, tc.hop).XDSAddr()
			}
			conn := dial(t, addr)
			var cs []*adsClient
			for i := range clients {
				c := newADSClient(t, conn, "delta", fmt.Sprintf("c%d", i), "tier", nil)
				c.subscribe(resource.ClusterType, name)
				cs = append(cs, c)
			}
			for _, c := range cs {
				c.waitTimeout(name, 1)
			}
			var took []time.Duration
			for v := int64(2); v < 2+changes; v++ {
				start := time.Now()
				o.set(resource.ClusterType, name, cluster(name, v))
				for _, c := range cs {
					c.waitTimeout(name, v)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			o.mu.Lock()
			streams := o.deltaOpens
			o.mu.Unlock()
			t.Logf("%s: one origin change reached %d clients in median %v (min %v, max %v); origin streams %d",
				tc.name, clients, took[len(took)/2], took[0], took[len(took)-1], streams)
			if tc.hops > 0 && streams != 1 {
				t.Errorf("origin streams = %d behind %d hops, want 1", streams, tc.hops)
			}
		})
	}
}

// TestTieredRelaysGlobAfterName: across a delta and a SotW hop, a glob
// whose only member the edge already holds by name is answered (the
// central relay resends a new glob's members; over SotW the edge asks
// again, without a version, for what the answer could not speak for), and
// an empty glob reaches an edge client as empty.
func TestTieredRelaysGlobAfterName(t *testing.T) {
	for _, hop := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(hop, func(t *testing.T) {
			o := newGCPOrigin(t)
			c0 := tierCluster("one/c0")
			o.set(resource.ClusterType, c0, cluster(c0, 1))
			central := centralRelay(t, o)
			edge := edgeRelay(t, central.XDSAddr(), hop)
			conn := dial(t, edge.XDSAddr())
			byName := newADSClient(t, conn, "delta", "by-name", "x", nil)
			byName.subscribe(resource.ClusterType, c0)
			byName.waitHolds(resource.ClusterType, c0)
			byGlob := newADSClient(t, conn, "delta", "by-glob", "x", nil)
			byGlob.subscribe(resource.ClusterType, tierCluster("one/*"))
			byGlob.waitHolds(resource.ClusterType, c0)

			empty := tierCluster("empty/*")
			e := newADSClient(t, conn, "delta", "empty", "x", nil)
			e.subscribe(resource.ClusterType, empty)
			ctx, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
			defer cancel()
			got, ok := e.recvOne(ctx.Done())
			if !ok || len(got.resources) != 0 || len(got.removed) != 1 || got.removed[0] != empty {
				t.Fatalf("empty glob answered with %d resources, removed %v (ok %v), want removed [%s]", len(got.resources), got.removed, ok, empty)
			}
		})
	}
}
