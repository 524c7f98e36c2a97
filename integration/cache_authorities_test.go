package integration

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Authorities kept apart (docs/protocol.md): each authority is its own
// trust domain, and the relay keeps one authority's origin from writing
// into another's names, even when that origin lies. Every test here has
// a real client that holds b.example's copy of a cluster (gen 2, from a
// real go-control-plane origin) and a.example's origin naming that
// cluster, as a.example's own.

const (
	aAuthority, bAuthority = "a.example", "b.example"
	clusterTypeName        = "envoy.config.cluster.v3.Cluster"
)

var bShared = xdstpName(bAuthority, clusterTypeName, "shared")

// federatedRelay runs the relay with a.example (origin a, transport
// aTransport; it also serves the plain names) and b.example (origin b,
// delta).
func federatedRelay(t *testing.T, a, aTransport, b string) *relayproc.Relay {
	t.Helper()
	return startRelay(t, func(c *config.Config) {
		c.Authorities = []config.Authority{
			{Name: aAuthority, Origins: []string{a}, Transport: aTransport, GlobCollections: config.GlobEmulated, PlainNames: new(true)},
			{Name: bAuthority, Origins: []string{b}, Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated},
		}
	})
}

// holdsBShared starts b.example's origin with bShared at gen 2 and a delta
// client of r that subscribes to it and holds it.
func holdsBShared(t *testing.T, r *relayproc.Relay, b *gcpOrigin) *adsClient {
	t.Helper()
	b.set(resource.ClusterType, bShared, cluster(bShared, 2))
	c := newADSClient(t, dial(t, r.XDSAddr()), "delta", "holder", "c", nil)
	c.subscribe(resource.ClusterType, bShared)
	c.waitTimeout(bShared, 2)
	return c
}

// checkRefusal checks a NACK's error_detail: it names the offending name
// and both authorities.
func checkRefusal(t *testing.T, detail *statuspb.Status, name string) {
	t.Helper()
	if detail == nil {
		t.Fatalf("a.example's origin was ACKed, want a NACK naming %s", name)
	}
	for _, want := range []string{name, `"` + aAuthority + `"`, `"` + bAuthority + `"`} {
		if !strings.Contains(detail.GetMessage(), want) {
			t.Errorf("NACK %q does not name %s", detail.GetMessage(), want)
		}
	}
}

// stillHoldsB: the client got nothing more, holds gen 2 of bShared, and
// gets b.example's next change (gen 3); the relay counted between least
// and most refusals.
func stillHoldsB(t *testing.T, r *relayproc.Relay, c *adsClient, b *gcpOrigin, least, most float64) {
	t.Helper()
	c.quiet()
	if got := c.timeoutSeconds(bShared); got != 2 {
		t.Fatalf("client holds gen %d of %s, want b.example's gen 2", got, bShared)
	}
	if got := relayMetric(t, r, "xds_relay_upstream_nacks_total", "type", clusterLabel, "reason", "other_authority"); got < least || got > most {
		t.Errorf("xds_relay_upstream_nacks_total{reason=other_authority} = %v, want %v to %v", got, least, most)
	}
	b.set(resource.ClusterType, bShared, cluster(bShared, 3))
	c.waitTimeout(bShared, 3)
}

// askA starts a scripted a.example origin, b.example's, the relay and a
// client holding b.example's copy (holdsBShared), which then subscribes to
// a.example's name; it returns once a.example's origin is asked for it.
func askA(t *testing.T, name string) (a *scriptedOrigin, b *gcpOrigin, r *relayproc.Relay, c *adsClient) {
	t.Helper()
	a, b = newScriptedOrigin(t), newGCPOrigin(t)
	r = federatedRelay(t, a.addr, xdstype.TransportDelta, b.addr)
	c = holdsBShared(t, r, b)
	c.subscribe(resource.ClusterType, name)
	a.next("subscription to "+name, subscribes(resource.ClusterType, name))
	return a, b, r, c
}

// TestAuthorityKeptApartOnDemand: a.example's origin answers a name
// asked of it on demand with a resource named as b.example's (the name
// asked among its aliases, as VHDS does). It is NACKed, naming the name
// and both authorities, and the client keeps b.example's copy, also after
// a.example's next change.
func TestAuthorityKeptApartOnDemand(t *testing.T) {
	onDemand := xdstpName(aAuthority, clusterTypeName, "on-demand")
	a, b, r, c := askA(t, onDemand)
	for i, gen := range []int64{666, 667} { // a.example's answer, then its next change
		nonce := []string{"n1", "n2"}[i]
		a.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: nonce, Resources: []*discoveryv3.Resource{
			{Name: bShared, Version: nonce, Resource: mustAny(t, cluster(bShared, gen)), Aliases: []string{onDemand}},
		}})
		checkRefusal(t, a.next("NACK of "+nonce, answers(nonce)).GetErrorDetail(), bShared)
	}
	stillHoldsB(t, r, c, b, 2, 2)
}

// TestAuthorityKeptApartWildcard: a.example's origin (a real
// go-control-plane, serving the plain names) lists in its wildcard a
// cluster named as b.example's. A client holding b.example's copy
// subscribes to the plain-name wildcard: a.example's origin is NACKed,
// naming it, and the client keeps b.example's copy, over a delta and a
// SotW upstream alike; over SotW, where the origin answers every NACK with
// the same state, the NACKs are paced.
func TestAuthorityKeptApartWildcard(t *testing.T) {
	for _, transport := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(transport, func(t *testing.T) {
			a, b := newGCPOrigin(t), newGCPOrigin(t)
			a.set(resource.ClusterType, "plain-1", cluster("plain-1", 1))
			a.set(resource.ClusterType, bShared, cluster(bShared, 666))
			r := federatedRelay(t, a.addr, transport, b.addr)
			c := holdsBShared(t, r, b)

			c.subscribe(resource.ClusterType, "*")
			checkRefusal(t, a.waitNACK(transport, resource.ClusterType), bShared)
			refusals := 1.0
			if transport == xdstype.TransportSotW {
				// A SotW origin answers each NACK with the same state: the
				// NACKs are paced (upstream.backoff), not thousands a second.
				refusals = 100
			}
			stillHoldsB(t, r, c, b, 1, refusals)
		})
	}
}

// TestAuthorityKeptApartAlias: a.example's origin answers a.example's own
// name with a resource that lists b.example's name among its aliases (a
// client matches an on-demand request by aliases, so it would take it as
// b.example's). The response is NACKed; the client is sent nothing of it.
func TestAuthorityKeptApartAlias(t *testing.T) {
	own := xdstpName(aAuthority, clusterTypeName, "own")
	a, b, r, c := askA(t, own)
	a.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1", Resources: []*discoveryv3.Resource{
		{Name: own, Version: "1", Resource: mustAny(t, cluster(own, 666)), Aliases: []string{bShared}},
	}})
	checkRefusal(t, a.next("NACK of n1", answers("n1")).GetErrorDetail(), bShared)
	stillHoldsB(t, r, c, b, 1, 1)
}

// TestAuthorityKeptApartResourceErrors: a.example's origin answers its own
// name with a resource error, or a removal, naming b.example's: NACKed,
// the client keeps b.example's copy.
func TestAuthorityKeptApartResourceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp func(own string) *discoveryv3.DeltaDiscoveryResponse
	}{
		{"resource error", func(own string) *discoveryv3.DeltaDiscoveryResponse {
			return &discoveryv3.DeltaDiscoveryResponse{ResourceErrors: []*discoveryv3.ResourceError{
				resErr(own, codes.NotFound, "no such cluster"), resErr(bShared, codes.NotFound, "gone"),
			}}
		}},
		{"removal", func(own string) *discoveryv3.DeltaDiscoveryResponse {
			return &discoveryv3.DeltaDiscoveryResponse{RemovedResources: []string{own, bShared}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := xdstpName(aAuthority, clusterTypeName, "own")
			a, b, r, c := askA(t, own)
			resp := tc.resp(own)
			resp.TypeUrl, resp.Nonce = resource.ClusterType, "n1"
			a.send(resp)
			checkRefusal(t, a.next("NACK of n1", answers("n1")).GetErrorDetail(), bShared)
			stillHoldsB(t, r, c, b, 1, 1)
		})
	}
}

// waitNACK waits until the origin received a NACK of typeURL over
// transport and returns its error_detail.
func (o *gcpOrigin) waitNACK(transport, typeURL string) *statuspb.Status {
	o.t.Helper()
	var detail *statuspb.Status
	o.waitFor("a NACK of "+typeURL, func() bool {
		if transport == xdstype.TransportSotW {
			for _, r := range o.sotwReqs {
				if r.GetTypeUrl() == typeURL && r.GetErrorDetail() != nil {
					detail = r.GetErrorDetail()
				}
			}
		} else {
			for _, r := range o.deltaReqs {
				if r.GetTypeUrl() == typeURL && r.GetErrorDetail() != nil {
					detail = r.GetErrorDetail()
				}
			}
		}
		return detail != nil
	})
	return detail
}

// TestOneKeyPerName: a client's name is fed by the key it resolves to for
// that client, whatever another link's wildcard says. The rules give
// "restricted-x" to r.example and the wildcard to o.example, whose origin
// (a real go-control-plane) lists its own "restricted-x" (a plain name:
// the link takes it, the rules decide per client). A client that
// subscribes to "restricted-x" and to the wildcard holds r.example's copy
// only, through o.example's changes, over delta and SotW clients; a
// wildcard client that does not ask for it by name gets o.example's.
func TestOneKeyPerName(t *testing.T) {
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			restricted, open := newGCPOrigin(t), newGCPOrigin(t)
			restricted.set(resource.ClusterType, "restricted-x", cluster("restricted-x", 2))
			open.set(resource.ClusterType, "open-1", cluster("open-1", 1))
			open.set(resource.ClusterType, "restricted-x", cluster("restricted-x", 666))
			r := startRelay(t, func(c *config.Config) {
				c.Authorities = []config.Authority{
					{Name: "r.example", Origins: []string{restricted.addr}, Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated},
					{Name: "o.example", Origins: []string{open.addr}, Transport: xdstype.TransportDelta, GlobCollections: config.GlobEmulated},
				}
				c.Aggregation.Rules = decodeAggRules(t, `
- name: restricted
  match: {resource_name: {prefix: "restricted-"}}
  result: {authority: r.example, group: [{literal: r}]}
- name: open
  default: true
  result: {authority: o.example, group: [{literal: all}]}
`)
			})
			conn := dial(t, r.XDSAddr())
			c := newADSClient(t, conn, variant, "both", "c", nil)
			c.subscribe(resource.ClusterType, "restricted-x")
			c.waitTimeout("restricted-x", 2)
			c.subscribe(resource.ClusterType, "restricted-x", "*")
			c.waitHolds(resource.ClusterType, "open-1", "restricted-x")
			open.set(resource.ClusterType, "restricted-x", cluster("restricted-x", 667))
			c.quiet()
			if got := c.timeoutSeconds("restricted-x"); got != 2 {
				t.Fatalf("client holds gen %d of restricted-x, want r.example's gen 2", got)
			}
			restricted.set(resource.ClusterType, "restricted-x", cluster("restricted-x", 3))
			c.waitTimeout("restricted-x", 3)

			w := newADSClient(t, conn, variant, "wildcard", "c", nil)
			w.subscribe(resource.ClusterType)
			w.waitHolds(resource.ClusterType, "open-1", "restricted-x")
			if got := w.timeoutSeconds("restricted-x"); got != 667 {
				t.Errorf("wildcard client holds gen %d of restricted-x, want o.example's 667", got)
			}
		})
	}
}
