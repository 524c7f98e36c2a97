package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/propagation"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// badRev is the ClusterLoadAssignment revision the breaker tests' clients
// cannot use (they NACK it): valid by the proto's rules, so validation
// lets it through, as it would a version a client rejects for its own
// reasons.
const badRev = 666

// rejectRev makes a client reject a ClusterLoadAssignment at revision bad.
func rejectRev(bad int64) func(*discoveryv3.Resource) string {
	return func(x *discoveryv3.Resource) string {
		if claRev(x) == bad {
			return fmt.Sprintf("overprovisioning factor %d not supported by this client", bad)
		}
		return ""
	}
}

// answerAll receives and answers (reject: NACK what it names, ACK the
// rest) one response per client (each answered as soon as it is taken),
// then on until every client's last revision of name is final (0: any)
// and no client has received anything for xdstest.QuietPeriod, all within
// f.timeout(): a rollback that follows the NACKs later than a quiet period
// (a loaded machine) is still taken. It returns, per client, the
// revisions of ClusterLoadAssignment name it was sent, in order, and how
// many NACKs the fleet sent.
func (f *fleet) answerAll(name string, reject func(*discoveryv3.Resource) string, final int64) (revs [][]int64, nacks int) {
	f.t.Helper()
	revs = make([][]int64, len(f.clients))
	take := func(i int, done <-chan struct{}) bool {
		r, nacked, ok := f.clients[i].recvAnswer(done, reject)
		if !ok {
			return false
		}
		if nacked != "" {
			nacks++
		}
		for _, x := range r.resources {
			if x.GetName() == name {
				revs[i] = append(revs[i], claRev(x))
			}
		}
		return true
	}
	first, cancel := context.WithTimeout(context.Background(), f.timeout())
	for i, c := range f.clients {
		if !take(i, first.Done()) {
			f.t.Fatalf("%s: no response within %v", c.name, f.timeout())
		}
	}
	cancel()
	limit := time.Now().Add(f.timeout())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.QuietPeriod)
		n := 0
		for i := range f.clients {
			for take(i, ctx.Done()) {
				n++
			}
		}
		cancel()
		if n == 0 && endIn(revs, final) {
			return revs, nacks
		}
		if time.Now().After(limit) {
			f.t.Fatalf("clients still receiving, or not all sent revision %d last, after %v: %v", final, f.timeout(), revs)
		}
	}
}

// nacksSince counts the relay's NACKs to o after the first fromDelta
// delta and fromSotW SotW requests.
func (o *gcpOrigin) nacksSince(fromDelta, fromSotW int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, q := range o.deltaReqs[fromDelta:] {
		if q.GetErrorDetail() != nil {
			n++
		}
	}
	for _, q := range o.sotwReqs[fromSotW:] {
		if q.GetErrorDetail() != nil {
			n++
		}
	}
	return n
}

// breakerFixture is an origin serving ClusterLoadAssignment name at
// revision 1, a relay (edit applied) and a fleet of n mixed clients that
// subscribe to it, every one of which ACKed revision 1 (so it is the last
// accepted version when the next arrives).
func breakerFixture(t *testing.T, edit func(*config.Config), name string, n int) (*gcpOrigin, *relayproc.Relay, *fleet) {
	t.Helper()
	o := newGCPOrigin(t)
	o.set(resource.EndpointType, name, cla(name, 1))
	r := startQuietRelay(t, edit, o.addr)
	f := newFleet(t, r.XDSAddr(), "mixed", n, 1+n/50)
	since := time.Now()
	f.subscribe(resource.EndpointType, name)
	f.waitRevisions(revisions([]string{name}, 1))
	f.settle()
	edsChangeAfter(t, r, since, propagation.Counts{Sent: int64(n), Acked: int64(n)})
	return o, r, f
}

// edsLabels are the labels of the EDS series of dsAuthority.
var edsLabels = []string{"authority", dsAuthority, "type", "envoy.config.endpoint.v3.ClusterLoadAssignment"}

// An origin publishes a version every client rejects. Once three distinct
// clients NACKed it, the NACK breaker holds it: every client is sent the
// last accepted version back, a client connecting later is sent only
// that, the origin hears one NACK with the clients' error, counted and on
// the page; the origin resending the same content causes no second NACK
// and sends the fleet nothing; its next version goes to everyone.
func TestDeliveryBreakerHoldsRejectedVersion(t *testing.T) {
	const clients = 6
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			name := dsEndpoints("breaker")
			o, r, f := breakerFixture(t, func(c *config.Config) {
				if up.edit != nil {
					up.edit(c)
				}
				c.RESTListen = "127.0.0.1:0"
			}, name, clients)

			fromDelta, fromSotW := o.deltaRequests(), o.sotwRequests()
			published := time.Now()
			o.set(resource.EndpointType, name, cla(name, badRev))
			got, nacks := f.answerAll(name, rejectRev(badRev), 1)
			nack := o.waitNACKAfter(fromDelta, fromSotW)
			heard := o.firstNackAfter(published).Sub(published)
			for i, revs := range got {
				if !slices.Equal(revs, []int64{badRev, 1}) {
					t.Errorf("%s was sent revisions %v, want the rejected one, then the last accepted one back [%d 1]", f.clients[i].name, revs, badRev)
				}
			}
			f.waitRevisions(revisions([]string{name}, 1))
			for _, want := range []string{"NACK breaker", fmt.Sprintf("%q", name), "overprovisioning factor 666 not supported"} {
				if !strings.Contains(nack, want) {
					t.Errorf("the origin's NACK %q does not say %s", nack, want)
				}
			}
			if n := relayMetric(t, r, "xds_relay_delivery_breaker_trips_total", edsLabels...); n != 1 {
				t.Errorf("xds_relay_delivery_breaker_trips_total = %v, want 1", n)
			}
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", "breaker", 1)

			late := newFleet(t, r.XDSAddr(), "mixed", 2, 1)
			late.subscribe(resource.EndpointType, name)
			for i, revs := range late.answerAllRevs(name) {
				if !slices.Equal(revs, []int64{1}) {
					t.Errorf("%s, connecting after the trip, was sent revisions %v, want only the last accepted [1]", late.clients[i].name, revs)
				}
			}
			if code, body := restEndpoints(t, r, name); code != http.StatusOK || strings.Contains(body, "666") || !strings.Contains(body, "overprovisioningFactor") {
				t.Errorf("a REST poll after the trip: %d %s, want the last accepted version, not the held one", code, body)
			}

			// The same content again (go-control-plane sends it under a new
			// version): nothing for the fleet, no second NACK.
			o.set(resource.EndpointType, name, cla(name, badRev))
			f.wantNothingResent(f.settle(), "after the origin resent the held version")
			if n := o.nacksSince(fromDelta, fromSotW); n != 1 {
				t.Errorf("the relay NACKed the origin %d times, want once", n)
			}

			o.set(resource.EndpointType, name, cla(name, 2))
			f.waitRevisions(revisions([]string{name}, 2))
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", "breaker", 0)
			t.Logf("%s: %d of %d clients were sent the rejected version and sent the last accepted one back (%d NACKs); the origin heard the breaker's NACK %.1f ms after publishing",
				up.name, countSent(got, badRev), clients, nacks, float64(heard.Microseconds())/1000)
		})
	}
}

// endIn reports whether every client's last revision is final (0: any).
func endIn(revs [][]int64, final int64) bool {
	if final == 0 {
		return true
	}
	for _, r := range revs {
		if len(r) == 0 || r[len(r)-1] != final {
			return false
		}
	}
	return true
}

// answerAllRevs is answerAll with every response ACKed.
func (f *fleet) answerAllRevs(name string) [][]int64 {
	f.t.Helper()
	revs, _ := f.answerAll(name, nil, 0)
	return revs
}

// countSent counts the clients that were sent revision rev.
func countSent(got [][]int64, rev int64) int {
	n := 0
	for _, revs := range got {
		if slices.Contains(revs, rev) {
			n++
		}
	}
	return n
}

// The "every client rejects" case, stopped: 200 clients are sent a
// version at once and every one NACKs it. After the third NACK the
// breaker holds it: every client is sent the last accepted version back,
// a client connecting later is not sent the held one, and the origin
// hears of it. The figures (clients sent it, the origin's NACK after
// publishing) are logged.
func TestDeliveryBreakerEveryClientRejects(t *testing.T) {
	const clients = 200
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			name := dsEndpoints("everyone-rejects")
			o, r, f := breakerFixture(t, up.edit, name, clients)
			fromDelta, fromSotW := o.deltaRequests(), o.sotwRequests()
			published := time.Now()
			o.set(resource.EndpointType, name, cla(name, badRev))
			got, nacks := f.answerAll(name, rejectRev(badRev), 1)
			o.waitNACKAfter(fromDelta, fromSotW)
			heard := o.firstNackAfter(published).Sub(published)
			f.waitRevisions(revisions([]string{name}, 1))
			rolledBack := 0
			for _, revs := range got {
				if len(revs) > 0 && revs[len(revs)-1] == 1 {
					rolledBack++
				}
			}
			if rolledBack != clients {
				t.Errorf("%d of %d clients were sent the last accepted version back, want all", rolledBack, clients)
			}
			late := newFleet(t, r.XDSAddr(), "mixed", 2, 1)
			late.subscribe(resource.EndpointType, name)
			for i, revs := range late.answerAllRevs(name) {
				if !slices.Equal(revs, []int64{1}) {
					t.Errorf("%s, connecting after the trip, was sent revisions %v, want [1]", late.clients[i].name, revs)
				}
			}
			if n := o.nacksSince(fromDelta, fromSotW); n != 1 {
				t.Errorf("the relay NACKed the origin %d times, want once", n)
			}
			t.Logf("%s, %d clients that all reject a version: %d were sent it (one fan-out, before any NACK), %d NACKs, %d sent the last accepted version back, late clients sent it: 0; the origin heard the breaker's NACK %.1f ms after publishing",
				up.name, clients, countSent(got, badRev), nacks, rolledBack, float64(heard.Microseconds())/1000)
		})
	}
}

// grpc-go's own xDS client rejects a ClusterLoadAssignment it cannot use
// (two endpoints at one address). Three of them, three distinct nodes,
// NACK it through the relay: the breaker trips on their own NACKs, each is
// sent the version it ACKed before back (the client page says the newest
// is held by the breaker), the origin hears grpc-go's error, and a fourth
// grpc-go client connecting afterwards resolves and calls the backend on
// the last accepted version.
func TestDeliveryBreakerGRPCClientsNack(t *testing.T) {
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) { grpcClientsTrip(t, up.edit, up.name) })
	}
}

// grpcClientsTrip is TestDeliveryBreakerGRPCClientsNack over one upstream
// transport.
func grpcClientsTrip(t *testing.T, edit func(*config.Config), upstream string) {
	o, ch := newChainOrigin(t)
	r := startQuietRelay(t, edit, o.addr)
	ids := []string{"grpc-0", "grpc-1", "grpc-2"}
	var before propagation.Reason
	accepted := ""
	for _, id := range ids {
		grpcXDSConn(t, grpcBootstrapAs(r.XDSAddr(), dsAuthority, id), "xds:///backend")
		p := waitReason(t, r, id, ch.claName, propagation.InSync)
		accepted, before = p.Acked, p.Reason
	}
	fromDelta, fromSotW := o.deltaRequests(), o.sotwRequests()
	published := time.Now()
	sa := ch.cla.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress()
	o.set(resource.EndpointType, ch.claName, withEndpoint(ch.cla, sa.GetAddress(), sa.GetPortValue()))
	nack := o.waitNACKAfter(fromDelta, fromSotW)
	heard := o.firstNackAfter(published).Sub(published)
	for _, want := range []string{"NACK breaker", "duplicate endpoint", `"grpc-0"`} {
		if !strings.Contains(nack, want) {
			t.Errorf("the origin's NACK %q does not say %s", nack, want)
		}
	}
	if n := relayMetric(t, r, "xds_relay_delivery_breaker_trips_total", edsLabels...); n != 1 {
		t.Errorf("xds_relay_delivery_breaker_trips_total = %v, want 1", n)
	}
	for _, id := range append(ids, "grpc-late") {
		if id == "grpc-late" {
			grpcXDSConn(t, grpcBootstrapAs(r.XDSAddr(), dsAuthority, id), "xds:///backend")
		}
		// Held by the breaker as soon as it is sent the last accepted
		// version back; its ACK of it may come a moment later.
		xdstest.Poll(t, id+": sent and ACKed the last accepted version "+accepted+", the newest held", func() error {
			p := clientPage(t, r, id)[ch.claName]
			if p.Reason != propagation.HeldByBreaker || p.Sent != accepted || p.Acked != accepted || p.Newest == accepted {
				return fmt.Errorf("%+v", p)
			}
			return nil
		})
	}
	t.Logf("%s: grpc-go xDS clients rejecting a ClusterLoadAssignment (was %s): held after 3 NACKs; the origin heard grpc-go's error %.1f ms after publishing",
		upstream, before, float64(heard.Microseconds())/1000)
}

// Tiers: clients below an edge relay reject a version. The edge's breaker
// trips and NACKs its origin, the central relay, with the breaker's
// detail; the central relay takes that one NACK from a relay as enough to
// trip its own, and NACKs the go-control-plane origin, which hears the
// clients' error from two hops down. Over a delta and a SotW hop.
func TestDeliveryBreakerTiers(t *testing.T) {
	for _, hop := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(hop+"-hop", func(t *testing.T) {
			name := xdstpName(tierAuthority, "envoy.config.endpoint.v3.ClusterLoadAssignment", "tiered")
			o := newGCPOrigin(t)
			o.set(resource.EndpointType, name, cla(name, 1))
			quiet := func(c *config.Config) { c.Log.Level = config.LogWarn }
			central := centralRelay(t, o, quiet)
			edge := startRelay(t, func(c *config.Config) {
				c.Log.Level = config.LogWarn
				c.Authorities = []config.Authority{{Name: tierAuthority, Origins: []string{central.XDSAddr()}, Transport: hop, GlobCollections: config.GlobNative}}
			})
			f := newFleet(t, edge.XDSAddr(), "mixed", 4, 1)
			since := time.Now()
			f.subscribe(resource.EndpointType, name)
			f.waitRevisions(revisions([]string{name}, 1))
			f.settle()
			edsChangeAfter(t, edge, since, propagation.Counts{Sent: 4, Acked: 4})
			edsChangeAfter(t, central, since, propagation.Counts{Sent: 1, Acked: 1})

			fromDelta, fromSotW := o.deltaRequests(), o.sotwRequests()
			published := time.Now()
			o.set(resource.EndpointType, name, cla(name, badRev))
			got, _ := f.answerAll(name, rejectRev(badRev), 1)
			nack := o.waitNACKAfter(fromDelta, fromSotW)
			heard := o.firstNackAfter(published).Sub(published)
			for _, want := range []string{"NACK breaker", "overprovisioning factor 666 not supported"} {
				if !strings.Contains(nack, want) {
					t.Errorf("the origin's NACK %q does not say %s", nack, want)
				}
			}
			tier := []string{"authority", tierAuthority, "type", "envoy.config.endpoint.v3.ClusterLoadAssignment"}
			for relay, r := range map[string]*relayproc.Relay{"edge": edge, "central": central} {
				waitRelayMetric(t, r, relay+" relay's breaker trips", func(v float64) bool { return v == 1 }, "xds_relay_delivery_breaker_trips_total", tier...)
			}
			f.waitRevisions(revisions([]string{name}, 1))
			f.wantNothingResent(f.settle(), "once both relays hold the version")
			t.Logf("%s hop: %d of 4 clients below the edge were sent the rejected version; both relays tripped; the origin heard it %.1f ms after publishing",
				hop, countSent(got, badRev), float64(heard.Microseconds())/1000)
		})
	}
}

// restEndpoints polls r's REST-JSON endpoint for ClusterLoadAssignment
// name.
func restEndpoints(t *testing.T, r *relayproc.Relay, name string) (int, string) {
	t.Helper()
	body := `{"node": {"id": "rest-node", "cluster": "rest"}, "resource_names": [` + strconv.Quote(name) + `]}`
	resp, err := http.Post("http://"+r.RESTAddr()+"/v3/discovery:endpoints", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
