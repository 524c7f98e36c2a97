package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/net/html"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/propagation"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// clusterFleet opens n clients (delta and SotW in turn) of node cluster
// cluster, named prefix-0 ..., on one connection to addr.
func clusterFleet(t *testing.T, addr, prefix, cluster string, n int) *fleet {
	t.Helper()
	conn := dial(t, addr)
	f := &fleet{t: t}
	for i := range n {
		f.clients = append(f.clients, newADSClient(t, conn, [...]string{"delta", "sotw"}[i%2], fmt.Sprintf("%s-%d", prefix, i), cluster, nil))
	}
	return f
}

// withWaves is edit, then waves and the breaker's clients set.
func withWaves(edit func(*config.Config), breaker int, waves ...config.Wave) func(*config.Config) {
	return func(c *config.Config) {
		if edit != nil {
			edit(c)
		}
		c.Delivery.Waves = waves
		c.Delivery.NackBreaker.Clients = breaker
	}
}

// A canary rollout: a good change goes to the canary wave first, to
// everyone else only once the canaries ACKed it and the wave's min_wait
// passed; a change the canaries reject trips the breaker inside the wave,
// so no other client is ever sent it; a client that connects while a
// version rolls out is served the last accepted one, and a client naming
// a resource that has no earlier version is never kept waiting.
func TestDeliveryWavesCanaryFirst(t *testing.T) {
	const minWait = 200 * time.Millisecond
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			name, fresh := dsEndpoints("canaried"), dsEndpoints("fresh")
			o := newGCPOrigin(t)
			o.set(resource.EndpointType, name, cla(name, 1))
			r := startQuietRelay(t, withWaves(up.edit, 2, config.Wave{NodeClusters: []string{"canary-*"}, MinWait: minWait}), o.addr)
			canary := clusterFleet(t, r.XDSAddr(), "canary", "canary-eu", 2)
			prod := clusterFleet(t, r.XDSAddr(), "prod", "prod-eu", 8)
			all := join(canary, prod)
			since := time.Now()
			all.subscribe(resource.EndpointType, name)
			all.waitRevisions(revisions([]string{name}, 1))
			all.settle()
			edsChangeAfter(t, r, since, propagation.Counts{Sent: 10, Acked: 10})

			// A good change. Nothing reads the canaries yet: they have not
			// ACKed, so the other clients must not be sent it.
			published := time.Now()
			o.set(resource.EndpointType, name, cla(name, 2))
			prod.wantNothingResent(prod.settle(), "while the canaries have not ACKed")
			if p := waitReason(t, r, "prod-0", name, propagation.HeldByWave); p.Acked == p.Newest {
				t.Errorf("prod-0 on the client page: %+v, want held by a wave, running the last accepted version", p)
			}
			p := waitRollout(t, r, func(ro delivery.RolloutView) bool { return ro.Open == 1 && ro.Progress[0].Sent == 2 })
			if p.Progress[0].Clients != 2 || p.Progress[0].Acked != 0 || p.Progress[1].Clients != 8 || p.Progress[1].Sent != 0 {
				t.Errorf("wave progress %+v, want the canaries' wave of 2 sent it, not ACKed; 8 others not sent it", p.Progress)
			}
			canary.waitRevisions(revisions([]string{name}, 2))
			prod.waitRevisions(revisions([]string{name}, 2))
			everyone := time.Since(published)
			if everyone < minWait {
				t.Errorf("everyone had the change %v after it was published, before the canary wave's min_wait %v", everyone, minWait)
			}
			all.settle()

			// A change the canaries reject: held inside their wave.
			o.set(resource.EndpointType, name, cla(name, badRev))
			got, _ := canary.answerAll(name, rejectRev(badRev), 2)
			for i, revs := range got {
				if !slices.Equal(revs, []int64{badRev, 2}) {
					t.Errorf("%s was sent %v, want the rejected version and the last accepted one back", canary.clients[i].name, revs)
				}
			}
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", "breaker", 1)
			prod.wantNothingResent(prod.settle(), "after the breaker tripped in the canary wave")

			// A good version again: a client connecting meanwhile gets the
			// last accepted one; a new resource reaches everyone at once.
			o.set(resource.EndpointType, name, cla(name, 3))
			late := clusterFleet(t, r.XDSAddr(), "late", "prod-us", 1)
			late.subscribe(resource.EndpointType, name)
			if revs := late.answerAllRevs(name); !slices.Equal(revs[0], []int64{2}) {
				t.Errorf("a client connecting during the rollout was sent %v, want the last accepted [2]", revs[0])
			}
			// The canaries, which subscribe to the new resource too, are not
			// read: its first wave never ACKs, yet nobody waits on it.
			join(canary, prod).subscribe(resource.EndpointType, name, fresh)
			o.set(resource.EndpointType, fresh, cla(fresh, 1))
			for i, revs := range prod.answerAllRevs(fresh) {
				if !slices.Equal(revs, []int64{1}) {
					t.Errorf("%s was sent %v of a resource new to it, want it at once [1]", prod.clients[i].name, revs)
				}
			}
			canary.waitRevisions(map[string]uint32{name: 3, fresh: 1})
			prod.waitRevisions(map[string]uint32{name: 3, fresh: 1})
			late.waitRevisions(map[string]uint32{name: 3})
			t.Logf("%s: a good change reached all 10 clients %.1f ms after it was published (canary wave min_wait %v); a rejected one reached 2 of 10",
				up.name, float64(everyone.Microseconds())/1000, minWait)
		})
	}
}

// waitRollout waits until /debug/delivery lists a rollout for which ok
// holds, and returns it.
func waitRollout(t *testing.T, r *relayproc.Relay, ok func(delivery.RolloutView) bool) delivery.RolloutView {
	t.Helper()
	var got delivery.RolloutView
	xdstest.Poll(t, "a rollout", func() error {
		p := deliveryPage(t, r)
		for _, ro := range p.Rollouts {
			if ok(ro) {
				got = ro
				return nil
			}
		}
		return fmt.Errorf("rollouts %+v", p.Rollouts)
	})
	return got
}

// Waves by share of the fleet: a wave of 1% of ten clients holds one (at
// least one client), the next wave half of them; a good change reaches
// everyone once both waves' min_wait passed and their clients ACKed, the
// page showing each wave's clients and ACKs. A wave whose clients do not
// ACK within max_wait stops the rollout: the others keep the last
// accepted version, the hold is counted, until a release by hand sends
// it to everyone.
func TestDeliveryWavesShareAndStall(t *testing.T) {
	const minWait = 100 * time.Millisecond
	for _, up := range deliveryUpstreams {
		t.Run(up.name, func(t *testing.T) {
			name := dsEndpoints("shared")
			o := newGCPOrigin(t)
			o.set(resource.EndpointType, name, cla(name, 1))
			r := startQuietRelay(t, func(c *config.Config) {
				withWaves(up.edit, 3, config.Wave{Share: 0.01, MinWait: minWait}, config.Wave{Share: 0.5, MinWait: minWait})(c)
				c.Delivery.MaxWait = 2 * time.Second
			}, o.addr)
			f := clusterFleet(t, r.XDSAddr(), "node", "prod", 10)
			since := time.Now()
			f.subscribe(resource.EndpointType, name)
			f.waitRevisions(revisions([]string{name}, 1))
			f.settle()
			edsChangeAfter(t, r, since, propagation.Counts{Sent: 10, Acked: 10})

			published := time.Now()
			o.set(resource.EndpointType, name, cla(name, 2))
			p := waitRollout(t, r, func(ro delivery.RolloutView) bool { return ro.Open == 1 && ro.Progress[0].Sent == 1 })
			if w := p.Progress[0]; w.Clients != 1 {
				t.Errorf("the 1%% wave of 10 clients holds %d, want 1 (at least one client)", w.Clients)
			}
			f.waitRevisionsTogether(revisions([]string{name}, 2))
			everyone := time.Since(published)
			if everyone < 2*minWait {
				t.Errorf("everyone had the change %v after it was published, before the waves' min_wait sum %v", everyone, 2*minWait)
			}
			f.settle()

			// Nobody reads wave 1's client: it never ACKs.
			stalled := time.Now()
			o.set(resource.EndpointType, name, cla(name, 3))
			p = waitRollout(t, r, func(ro delivery.RolloutView) bool { return ro.Stalled })
			if p.Open != 1 || time.Since(stalled) < 2*time.Second {
				t.Errorf("stalled rollout %+v %v after the change, want wave 1 open, after max_wait 2s", p, time.Since(stalled))
			}
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", "wave_stalled", 1)
			if code, body := releasePOST(t, r, url.Values{"authority": {dsAuthority}}, "http://"+r.AdminAddr()); code != http.StatusSeeOther {
				t.Fatalf("release: %d %s", code, body)
			}
			f.waitRevisions(revisions([]string{name}, 3))
			waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", "wave_stalled", 0)
			t.Logf("%s: a good change reached all 10 clients %.1f ms after it was published (two waves of min_wait %v)",
				up.name, float64(everyone.Microseconds())/1000, minWait)
		})
	}
}

// The status page's Delivery section, rendered by the relay (no script)
// and in headless Chromium once its script redrew it: a version the
// breaker holds (who NACKed it and why, how many clients hold which
// version, its release button) and the rollout it stopped (its waves, each
// wave's clients).
func TestDeliveryBreakerAndWavesOnStatusPage(t *testing.T) {
	name := dsEndpoints("paged")
	o := newGCPOrigin(t)
	o.set(resource.EndpointType, name, cla(name, 1))
	r := startQuietRelay(t, withWaves(nil, 1, config.Wave{NodeClusters: []string{"canary-*"}}), o.addr)
	canary := clusterFleet(t, r.XDSAddr(), "canary", "canary-eu", 1)
	prod := clusterFleet(t, r.XDSAddr(), "prod", "prod-eu", 2)
	all := join(canary, prod)
	since := time.Now()
	all.subscribe(resource.EndpointType, name)
	all.waitRevisions(revisions([]string{name}, 1))
	all.settle()
	edsChangeAfter(t, r, since, propagation.Counts{Sent: 3, Acked: 3})
	o.set(resource.EndpointType, name, cla(name, badRev))
	canary.answerAll(name, rejectRev(badRev), 1)
	waitHeldOf(t, r, "envoy.config.endpoint.v3.ClusterLoadAssignment", "breaker", 1)
	waitRollout(t, r, func(ro delivery.RolloutView) bool { return ro.Stalled })
	prod.settle()

	check := func(how string, doc *html.Node) {
		t.Helper()
		held := rows(byID(t, doc, "held-versions-rows"))
		if len(held) != 1 || held[0][2] != name || !strings.Contains(held[0][4], "1 client(s); canary-0: overprovisioning factor 666") ||
			!strings.Contains(held[0][6], "last_accepted") || !strings.Contains(held[0][6], ": 3 (3 ACKed)") || held[0][7] != "Release" {
			t.Errorf("%s: held version rows %q, want %s, NACKed by canary-0 and why, 3 clients on the last accepted version, Release", how, held, name)
		}
		ros := rows(byID(t, doc, "rollouts-rows"))
		if len(ros) != 1 || !strings.Contains(ros[0][4], "1 of 1 open, stopped") || !strings.Contains(ros[0][5], "wave 1: 1 clients") ||
			!strings.Contains(ros[0][5], "everyone else: 2 clients, 0 sent") {
			t.Errorf("%s: rollout rows %q, want the stopped rollout, wave 1's one client, 2 others not sent it", how, ros)
		}
	}
	resp, err := http.Get("http://" + r.AdminAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	check("rendered by the relay", doc)
	check("redrawn in Chromium", dumpDOM(t, findChromium(t), "http://"+r.AdminAddr()+"/"))
}

// waitRevisionsTogether is waitRevisions reading the clients in turn, a
// few milliseconds each, so that a client the others wait on (a wave's)
// is never left unread while the test waits on another.
func (f *fleet) waitRevisionsTogether(revs map[string]uint32) {
	f.t.Helper()
	limit := time.Now().Add(f.timeout())
	for {
		done := 0
		for _, c := range f.clients {
			if holdsRevisions(c, revs) {
				done++
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			c.recvOne(ctx.Done())
			cancel()
		}
		if done == len(f.clients) {
			return
		}
		if time.Now().After(limit) {
			f.t.Fatalf("%d of %d clients hold %v after %v", done, len(f.clients), revs, f.timeout())
		}
	}
}

// holdsRevisions reports whether c holds exactly the ClusterLoadAssignments
// revs (name → revision).
func holdsRevisions(c *adsClient, revs map[string]uint32) bool {
	h := c.held[resource.EndpointType]
	if len(h) != len(revs) {
		return false
	}
	for n, r := range revs {
		if claRev(h[n]) != int64(r) {
			return false
		}
	}
	return true
}
