package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/net/html"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/config"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/propagation"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// deliveryUpstreams are the upstream transports every safe-delivery
// scenario runs over.
var deliveryUpstreams = []struct {
	name string
	edit func(*config.Config)
}{
	{"delta-upstream", nil},
	{"sotw-upstream", sotwUpstream},
}

// startQuietRelay is startRelay logging warnings only (many clients'
// debug lines are not what these tests look at).
func startQuietRelay(t *testing.T, edit func(*config.Config), origins ...string) *relayproc.Relay {
	t.Helper()
	return startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogWarn
		if edit != nil {
			edit(c)
		}
	}, origins...)
}

// endpointsOn is a ClusterLoadAssignment of one endpoint on port (70000 is
// past SocketAddress.port_value's rule, lte 65535).
func endpointsOn(name string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}}}}}
}

// portsIn lists the endpoint ports of the ClusterLoadAssignments rs carry.
func portsIn(rs []received) []uint32 {
	var out []uint32
	for _, r := range rs {
		for _, x := range r.resources {
			c := &endpointv3.ClusterLoadAssignment{}
			if x.GetResource().UnmarshalTo(c) != nil {
				continue
			}
			for _, l := range c.GetEndpoints() {
				for _, e := range l.GetLbEndpoints() {
					out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue())
				}
			}
		}
	}
	return out
}

// waitNACKAfter waits for the relay's first NACK to o after the first fromDelta
// delta and fromSotW SotW requests, and returns its error_detail message.
func (o *gcpOrigin) waitNACKAfter(fromDelta, fromSotW int) string {
	o.t.Helper()
	var msg string
	o.waitFor("a NACK from the relay", func() bool {
		for _, q := range o.deltaReqs[fromDelta:] {
			if q.GetErrorDetail() != nil {
				msg = q.GetErrorDetail().GetMessage()
				return true
			}
		}
		for _, q := range o.sotwReqs[fromSotW:] {
			if q.GetErrorDetail() != nil {
				msg = q.GetErrorDetail().GetMessage()
				return true
			}
		}
		return false
	})
	return msg
}

// An origin publishes a ClusterLoadAssignment whose endpoint port is
// 70000, invalid by the proto's own rules: no client receives it (every
// client's next response is the origin's next valid version), a client
// connecting meanwhile is served the last valid one, and the origin hears
// a NACK naming the resource and the field.
func TestDeliveryInvalidVersionStopped(t *testing.T) {
	const clients = 50
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			name := dsEndpoints("checked")
			o := newGCPOrigin(t)
			o.set(resource.EndpointType, name, endpointsOn(name, 8080))
			r := startQuietRelay(t, up.edit, o.addr)
			f := newFleet(t, r.XDSAddr(), "mixed", clients, 1)
			f.subscribe(resource.EndpointType, name)
			f.waitHolds(resource.EndpointType, name)
			f.settle()

			fromDelta, fromSotW := o.deltaRequests(), o.sotwRequests()
			published := time.Now()
			o.set(resource.EndpointType, name, endpointsOn(name, 70000))
			nack := o.waitNACKAfter(fromDelta, fromSotW)
			heard := time.Since(published)
			for _, want := range []string{fmt.Sprintf("%q", name), "SocketAddress.PortValue", "less than or equal to 65535"} {
				if !strings.Contains(nack, want) {
					t.Errorf("the origin's NACK %q does not name %s", nack, want)
				}
			}

			late := newFleet(t, r.XDSAddr(), "mixed", 2, 1)
			late.subscribe(resource.EndpointType, name)
			for i, rs := range late.recvChange() {
				if got := portsIn(rs); !slices.Equal(got, []uint32{8080}) {
					t.Errorf("%s, connecting after the invalid version, was served ports %v, want the last valid version's [8080]", late.clients[i].name, got)
				}
			}

			o.set(resource.EndpointType, name, endpointsOn(name, 9090))
			gotBad := 0
			for i, rs := range f.recvChange() {
				ports := portsIn(rs)
				if slices.Contains(ports, 70000) {
					gotBad++
				}
				if !slices.Equal(ports, []uint32{9090}) {
					t.Errorf("%s received ports %v after the invalid version, want only the next valid one [9090]", f.clients[i].name, ports)
				}
			}
			if gotBad > 0 {
				t.Errorf("%d of %d clients received the invalid version", gotBad, clients)
			}
			if n := relayMetric(t, r, "xds_relay_delivery_invalid_total", "authority", dsAuthority, "type", "envoy.config.endpoint.v3.ClusterLoadAssignment"); n != 1 {
				t.Errorf("xds_relay_delivery_invalid_total = %v, want 1", n)
			}
			t.Logf("invalid ClusterLoadAssignment (port 70000), %s: %d of %d clients received it; the origin heard the relay's NACK %.1f ms after publishing it",
				up.name, gotBad, clients, float64(heard.Microseconds())/1000)
		})
	}
}

// plainClusters are n cluster names c-00 ... (plain names: Envoy's
// wildcard CDS, served by dsAuthority's plain-names link).
func plainClusters(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c-%02d", i)
	}
	return out
}

// clusterBodies are the origin's clusters names, at revision rev.
func clusterBodies(names []string, rev int64) map[string]types.Resource {
	out := make(map[string]types.Resource, len(names))
	for _, n := range names {
		out[n] = cluster(n, rev)
	}
	return out
}

// removalsIn counts what one client's responses removed of held, the
// names it held before: delta removals, or names a SotW full-state
// response left out.
func removalsIn(rs []received, held []string) int {
	n := 0
	for _, r := range rs {
		n += len(r.removed)
		if r.typeURL == resource.ClusterType && len(r.removed) == 0 && isSotWFullState(r) {
			in := map[string]bool{}
			for _, x := range r.resources {
				in[x.GetName()] = true
			}
			for _, h := range held {
				if !in[h] {
					n++
				}
			}
		}
	}
	return n
}

// isSotWFullState: r came over SotW (its resources carry the response's
// version_info, never a delta resource's own hash of 64 hex digits).
func isSotWFullState(r received) bool {
	return len(r.resources) == 0 || len(r.resources[0].GetVersion()) != 64
}

// heldNow reads xds_relay_delivery_held of dsAuthority's Clusters.
func heldNow(t *testing.T, r *relayproc.Relay, reason string) float64 {
	t.Helper()
	return relayMetric(t, r, "xds_relay_delivery_held", "authority", dsAuthority, "type", "envoy.config.cluster.v3.Cluster", "reason", reason)
}

// waitHeld waits until xds_relay_delivery_held of dsAuthority's Clusters
// for reason is n.
func waitHeld(t *testing.T, r *relayproc.Relay, reason string, n float64) {
	t.Helper()
	waitHeldOf(t, r, "envoy.config.cluster.v3.Cluster", reason, n)
}

// waitHeldOf is waitHeld for the type labelled typ.
func waitHeldOf(t *testing.T, r *relayproc.Relay, typ, reason string, n float64) {
	t.Helper()
	waitRelayMetric(t, r, fmt.Sprintf("%v %s removals held (%s)", n, typ, reason), func(v float64) bool { return v == n },
		"xds_relay_delivery_held", "authority", dsAuthority, "type", typ, "reason", reason)
}

// noRemovalsThrough changes cluster c-00 at the origin (set) and checks
// that every client's next responses carry that change and no removal of
// held: nothing held back was sent meanwhile. It returns how many clients
// received removals.
func (f *fleet) noRemovalsThrough(set func(), held []string) int {
	f.t.Helper()
	set()
	withRemovals := 0
	for i, rs := range f.recvChange() {
		if n := removalsIn(rs, held); n > 0 {
			withRemovals++
			f.t.Errorf("%s received %d removals: %s", f.clients[i].name, n, describe(rs))
		}
		if got := len(f.clients[i].names(resource.ClusterType)); got < len(held) {
			f.t.Errorf("%s holds %d clusters, want at least the %d it held", f.clients[i].name, got, len(held))
		}
	}
	return withRemovals
}

// An origin drops 80 of its 95 clusters: no client receives a removal,
// the hold is shown and counted; a normal change beside it still flows; a
// cross-site POST cannot release it; the status page's form does, and
// every client then receives the 80 removals. Before that, a normal
// change removing 2 of 95 is delivered at once.
func TestDeliveryMassDeletionHeld(t *testing.T) {
	const clients = 20
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			names := plainClusters(95)
			o := newGCPOrigin(t)
			o.setAll(resource.ClusterType, clusterBodies(names, 1))
			r := startQuietRelay(t, up.edit, o.addr)
			f := newFleet(t, r.XDSAddr(), "mixed", clients, 1)
			f.subscribe(resource.ClusterType)
			f.waitHolds(resource.ClusterType, names...)
			f.settle()

			// 2 of 95: a normal change, delivered at once.
			if err := o.linear(resource.ClusterType).UpdateResources(nil, names[93:]); err != nil {
				t.Fatal(err)
			}
			f.waitHolds(resource.ClusterType, names[:93]...)
			if v := heldNow(t, r, delivery.ReasonShare); v != 0 {
				t.Errorf("a change removing 2 of 95 held %v removals", v)
			}

			// 80 of 93: held.
			if err := o.linear(resource.ClusterType).UpdateResources(nil, names[13:93]); err != nil {
				t.Fatal(err)
			}
			waitHeld(t, r, delivery.ReasonShare, 80)
			page := deliveryPage(t, r)
			if len(page.Held) != 1 || page.Held[0].Resources != 80 || page.Held[0].Reason != delivery.ReasonShare {
				t.Errorf("/debug/delivery held = %+v, want one hold of 80 (%s)", page.Held, delivery.ReasonShare)
			}
			removed := f.noRemovalsThrough(func() { o.set(resource.ClusterType, names[0], cluster(names[0], 2)) }, names[:93])
			late := newFleet(t, r.XDSAddr(), "mixed", 2, 1) // connecting while the removals are held
			late.subscribe(resource.ClusterType)
			late.waitHolds(resource.ClusterType, names[:93]...)
			// Why is this client behind? The removal is held.
			if p := waitReason(t, r, f.clients[0].name, names[50], propagation.HeldByDeletionGuard); p.Sent == "" || p.Sent != p.Newest {
				t.Errorf("%s on the client page: %+v, want it held by the deletion guard, still sent", names[50], p)
			}

			// A page on another site cannot release it.
			if code, body := releasePOST(t, r, url.Values{"authority": {dsAuthority}}, "http://evil.example"); code != http.StatusForbidden {
				t.Errorf("cross-site release = %d %q, want 403", code, body)
			}
			if v := heldNow(t, r, delivery.ReasonShare); v != 80 {
				t.Errorf("held after a refused release = %v, want 80", v)
			}
			// The status page's form does.
			code, _ := releasePOST(t, r, url.Values{"authority": {dsAuthority}, "type": {resource.ClusterType}}, "http://"+r.AdminAddr())
			if code != http.StatusSeeOther {
				t.Errorf("release from the status page's form = %d, want 303 back to it", code)
			}
			f.waitHolds(resource.ClusterType, names[:13]...)
			if v := heldNow(t, r, delivery.ReasonShare); v != 0 {
				t.Errorf("held after the release = %v", v)
			}
			t.Logf("80 of 95 clusters removed at the origin, %s: %d of %d clients received removals before the release; each received the 80 after it",
				up.name, removed, clients)
		})
	}
}

// deliveryPage is r's /debug/delivery.
func deliveryPage(t *testing.T, r *relayproc.Relay) delivery.Page {
	t.Helper()
	resp, err := http.Get("http://" + r.AdminAddr() + relayadmin.DeliveryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p delivery.Page
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("%s: %v", relayadmin.DeliveryPath, err)
	}
	return p
}

// releasePOST posts form to the release endpoint as a browser's form on
// origin would (Origin header; the redirect not followed): status, body.
func releasePOST(t *testing.T, r *relayproc.Relay, form url.Values, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+r.AdminAddr()+relayadmin.DeliveryReleasePath, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	client := &http.Client{Timeout: xdstest.WaitTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The origin restarts empty at the same address (a go-control-plane
// origin whose first snapshot after its restart is empty), or the relay
// fails over to a second origin whose snapshot is still empty: the first
// state after the reconnect would remove all 50 clusters. No client
// receives a removal; the hold is counted; the origin's next snapshot
// still reaches everyone.
func TestDeliveryEmptyOriginAfterReconnect(t *testing.T) {
	const clients = 20
	names := plainClusters(50)
	for _, up := range deliveryUpstreams {
		for _, tc := range []struct {
			name string
			// origins starts the origins of the relay, the first holding
			// names; empty stops that one and returns the origin the relay
			// reaches next, serving an empty snapshot.
			origins func(t *testing.T) (origins []string, empty func() *gcpOrigin)
		}{
			{"restart-empty", func(t *testing.T) ([]string, func() *gcpOrigin) {
				o := clusterSnapshotOrigin(t, "v1", names)
				return []string{o.addr}, func() *gcpOrigin {
					addr := o.addr
					o.stop()
					lis, err := net.Listen("tcp", addr)
					if err != nil {
						t.Fatalf("listen again on %s: %v", addr, err)
					}
					snaps := cachev3.NewSnapshotCache(true, oneSnapshot{}, nil)
					restarted := serveOrigin(t, &gcpOrigin{snaps: snaps, xds: snaps}, lis)
					restarted.setSnapshot("restarted-1", clusterSnapshot(nil))
					return restarted
				}
			}},
			{"failover-to-empty", func(t *testing.T) ([]string, func() *gcpOrigin) {
				o := clusterSnapshotOrigin(t, "v1", names)
				second := clusterSnapshotOrigin(t, "empty-1", nil)
				return []string{o.addr, second.addr}, func() *gcpOrigin {
					o.stop()
					return second
				}
			}},
		} {
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				origins, empty := tc.origins(t)
				r := startQuietRelay(t, up.edit, origins...)
				f := newFleet(t, r.XDSAddr(), "mixed", clients, 1)
				f.subscribe(resource.ClusterType)
				f.waitHolds(resource.ClusterType, names...)
				f.settle()

				next := empty()
				waitHeld(t, r, delivery.ReasonEmpty, 50)
				removed := f.noRemovalsThrough(func() { next.setSnapshot("next-2", clusterSnapshot([]string{"new"})) }, names)
				if removed > 0 {
					t.Errorf("%d of %d clients received removals", removed, clients)
				}
				// The origin loads its real state: the hold ends by itself.
				next.setSnapshot("next-3", clusterSnapshot(append(slices.Clone(names), "new")))
				waitHeld(t, r, delivery.ReasonEmpty, 0)
				t.Logf("%s, %s: %d of %d clients received removals of the 50 clusters", tc.name, up.name, removed, clients)
			})
		}
	}
}

// clusterSnapshot is a snapshot of the clusters names at revision 1.
func clusterSnapshot(names []string) map[resource.Type][]types.Resource {
	rs := []types.Resource{}
	for _, n := range names {
		rs = append(rs, cluster(n, 1))
	}
	return map[resource.Type][]types.Resource{resource.ClusterType: rs}
}

// clusterSnapshotOrigin is a snapshot origin serving names under version.
func clusterSnapshotOrigin(t *testing.T, version string, names []string) *gcpOrigin {
	t.Helper()
	o := newSnapshotOrigin(t)
	o.setSnapshot(version, clusterSnapshot(names))
	return o
}

// The status page's Delivery section, in headless Chromium once its
// script redrew it: the held removal (where, why, how many, the first
// names) with its release button, a form posting its authority and type to
// the release endpoint; the invalid version with its field.
func TestDeliveryStatusPageInChromium(t *testing.T) {
	chromium := findChromium(t)
	names := plainClusters(12)
	o := newGCPOrigin(t)
	o.setAll(resource.ClusterType, clusterBodies(names, 1))
	cla := dsEndpoints("shown")
	o.set(resource.EndpointType, cla, endpointsOn(cla, 8080))
	r := startQuietRelay(t, nil, o.addr)
	f := newFleet(t, r.XDSAddr(), "delta", 1, 1)
	f.subscribe(resource.ClusterType)
	f.subscribe(resource.EndpointType, cla)
	f.waitHolds(resource.ClusterType, names...)
	f.waitHolds(resource.EndpointType, cla)

	o.set(resource.EndpointType, cla, endpointsOn(cla, 70000))
	if err := o.linear(resource.ClusterType).UpdateResources(nil, names[2:]); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, r, delivery.ReasonShare, 10)
	waitRelayMetric(t, r, "the invalid version counted", func(v float64) bool { return v == 1 },
		"xds_relay_delivery_invalid_total", "authority", dsAuthority, "type", "envoy.config.endpoint.v3.ClusterLoadAssignment")

	doc := dumpDOM(t, chromium, "http://"+r.AdminAddr()+"/")
	if got := attr(byID(t, doc, "delivery"), "data-rendered"); got != "live" {
		t.Errorf("section delivery data-rendered = %q, want live (redrawn by the script)", got)
	}
	held := rows(byID(t, doc, "held-rows"))
	if len(held) != 1 {
		t.Fatalf("held rows %q, want 1", held)
	}
	h := held[0]
	if h[0] != dsAuthority || h[2] != "Cluster" || !strings.Contains(h[3], delivery.ReasonShare) || !strings.HasSuffix(h[4], "ago)") ||
		!strings.HasPrefix(h[5], "10: c-02, c-03") || h[6] != "Release" {
		t.Errorf("held row %q, want [%s <group> Cluster <why: %s> <since> \"10: c-02, c-03, …\" Release]", h, dsAuthority, delivery.ReasonShare)
	}
	form := firstElement(byID(t, doc, "held-rows"), "form")
	if form == nil || attr(form, "method") != "post" || attr(form, "action") != relayadmin.DeliveryReleasePath {
		t.Fatalf("the release button is not a form posting to %s: %v", relayadmin.DeliveryReleasePath, form)
	}
	inputs := map[string]string{}
	for in := firstElement(form, "input"); in != nil; in = nextElement(in, "input") {
		inputs[attr(in, "name")] = attr(in, "value")
	}
	if inputs["authority"] != dsAuthority || inputs["type"] != resource.ClusterType {
		t.Errorf("the release form posts %v, want authority %s and type %s", inputs, dsAuthority, resource.ClusterType)
	}
	invalid := rows(byID(t, doc, "invalid-rows"))
	if len(invalid) != 1 || invalid[0][3] != cla || !strings.Contains(invalid[0][4], "SocketAddress.PortValue") {
		t.Errorf("invalid rows %q, want %s with its field", invalid, cla)
	}
}

// nextElement is the next sibling of n named tag, nil when none.
func nextElement(n *html.Node, tag string) *html.Node {
	for c := n.NextSibling; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == tag {
			return c
		}
	}
	return nil
}

// authorities[].delivery overrides the top-level section for its
// authority, and a reload applies new settings to the next origin change:
// with the guard off for the authority a mass deletion is delivered; once
// a reload turns it on again, the next one is held.
func TestDeliveryOverrideAndReload(t *testing.T) {
	names := plainClusters(20)
	o := newGCPOrigin(t)
	o.setAll(resource.ClusterType, clusterBodies(names, 1))
	var cfg *config.Config
	r := startQuietRelay(t, func(c *config.Config) {
		c.Authorities[0].Delivery.DeletionGuard.MaxRemovedShare = new(1.0) // off for the authority
		cfg = c
	}, o.addr)
	f := newFleet(t, r.XDSAddr(), "mixed", 2, 1)
	f.subscribe(resource.ClusterType)
	f.waitHolds(resource.ClusterType, names...)

	if err := o.linear(resource.ClusterType).UpdateResources(nil, names[15:]); err != nil {
		t.Fatal(err)
	}
	f.waitHolds(resource.ClusterType, names[:15]...) // 5 of 20: delivered either way
	if err := o.linear(resource.ClusterType).UpdateResources(nil, names[2:15]); err != nil {
		t.Fatal(err)
	}
	f.waitHolds(resource.ClusterType, names[:2]...) // 13 of 15, guard off: delivered

	next := *cfg
	next.Authorities = slices.Clone(cfg.Authorities)
	next.Authorities[0].Delivery = config.DeliveryOverride{} // the top-level guard again
	if err := r.ReloadConfig(&next); err != nil {
		t.Fatalf("reload turning the guard on: %v", err)
	}
	o.setAll(resource.ClusterType, clusterBodies(names, 2))
	f.waitHolds(resource.ClusterType, names...)
	if err := o.linear(resource.ClusterType).UpdateResources(nil, names[2:]); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, r, delivery.ReasonShare, 18)
	if removed := f.noRemovalsThrough(func() { o.set(resource.ClusterType, names[0], cluster(names[0], 3)) }, names); removed > 0 {
		t.Errorf("%d clients received removals after the reload turned the guard on", removed)
	}
}

// In a full-state type (Clusters) an invalid version is not a removal: a
// response carrying an invalid version of one cluster and a valid change
// of another gives every client the valid change and leaves the invalid
// cluster at its previous version, in SotW clients' full state too.
func TestDeliveryInvalidClusterKeptInFullState(t *testing.T) {
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			names := plainClusters(3)
			o := newGCPOrigin(t)
			o.setAll(resource.ClusterType, clusterBodies(names, 1))
			r := startQuietRelay(t, up.edit, o.addr)
			f := newFleet(t, r.XDSAddr(), "mixed", 4, 1)
			f.subscribe(resource.ClusterType)
			f.waitHolds(resource.ClusterType, names...)
			f.settle()

			bad := cluster(names[1], 2)
			bad.ConnectTimeout = durationpb.New(-5 * time.Second) // connect_timeout must be > 0
			fromDelta, fromSotW := o.deltaRequests(), o.sotwRequests()
			o.setAll(resource.ClusterType, map[string]types.Resource{names[0]: cluster(names[0], 2), names[1]: bad})
			if nack := o.waitNACKAfter(fromDelta, fromSotW); !strings.Contains(nack, "Cluster.ConnectTimeout") {
				t.Errorf("NACK %q does not name Cluster.ConnectTimeout", nack)
			}
			for i, rs := range f.recvChange() {
				c := f.clients[i]
				if n := removalsIn(rs, names); n > 0 {
					t.Errorf("%s received %d removals: %s", c.name, n, describe(rs))
				}
				held := c.held[resource.ClusterType]
				if got := connectTimeout(t, held[names[0]]); got != 2 {
					t.Errorf("%s holds %s with timeout %ds, want the valid change (2s)", c.name, names[0], got)
				}
				if got := connectTimeout(t, held[names[1]]); got != 1 {
					t.Errorf("%s holds %s with timeout %ds, want its previous version (1s)", c.name, names[1], got)
				}
			}
		})
	}
}

// connectTimeout is the connect timeout, in seconds, of the Cluster x
// carries (-1: none held).
func connectTimeout(t *testing.T, x *discoveryv3.Resource) int64 {
	t.Helper()
	if x == nil {
		return -1
	}
	c := &clusterv3.Cluster{}
	if err := x.GetResource().UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	return c.GetConnectTimeout().GetSeconds()
}

// A glob collection clients subscribe to is emptied by the origin (its 3
// members removed, 3 of the type's 13: under the share): held, whatever
// its size; a member added meanwhile reaches everyone beside the held
// ones; the origin sending the members again ends the hold.
func TestDeliveryGlobEmptied(t *testing.T) {
	pool := endpointNames("pool", 3)
	glob := xdstpName(dsAuthority, "envoy.config.endpoint.v3.ClusterLoadAssignment", "pool/*")
	for i := range pool {
		pool[i] = xdstpName(dsAuthority, "envoy.config.endpoint.v3.ClusterLoadAssignment", fmt.Sprintf("pool/m-%d", i))
	}
	others := endpointNames("other", 10)
	snapshot := func(names ...string) map[resource.Type][]types.Resource {
		var rs []types.Resource
		for _, n := range names {
			rs = append(rs, endpointsOn(n, 8080))
		}
		return map[resource.Type][]types.Resource{resource.EndpointType: rs}
	}
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			o := newSnapshotOrigin(t)
			o.setSnapshot("v1", snapshot(append(slices.Clone(others), pool...)...))
			r := startQuietRelay(t, up.edit, o.addr)
			f := newFleet(t, r.XDSAddr(), "mixed", 4, 1)
			f.subscribe(resource.EndpointType, glob)
			f.waitHolds(resource.EndpointType, pool...)
			f.settle()

			o.setSnapshot("v2", snapshot(others...))
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", delivery.ReasonEmpty, 3)
			added := xdstpName(dsAuthority, "envoy.config.endpoint.v3.ClusterLoadAssignment", "pool/m-new")
			o.setSnapshot("v3", snapshot(append(slices.Clone(others), added)...))
			f.waitHolds(resource.EndpointType, append(slices.Clone(pool), added)...)

			o.setSnapshot("v4", snapshot(append(append(slices.Clone(others), added), pool...)...))
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", delivery.ReasonEmpty, 0)
			for i, rs := range f.settle() {
				if n := removalsIn(rs, pool); n > 0 {
					t.Errorf("%s received %d removals: %s", f.clients[i].name, n, describe(rs))
				}
			}
		})
	}
}
