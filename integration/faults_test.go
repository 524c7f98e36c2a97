package integration

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
)

// The fault suite (issue #11): what a fleet behind one relay holds while
// its origin fails. Each scenario runs a real go-control-plane origin, the
// relay process and delta and SotW clients over shared connections.

// claType is the ClusterLoadAssignment type's label in metrics.
var claType = []string{"type", "envoy.config.endpoint.v3.ClusterLoadAssignment"}

// TestFaultOriginKilled: 200 clients hold ten resources when the origin
// serving them is killed. No client stream ends, no client loses or is
// resent anything, and 20 new clients are served from the cache (no cache
// miss); then an origin serves again and one update reaches all 220
// clients as one response each, with nothing else resent. In restart the
// killed origin comes back at its address; in failover a second origin
// with the same content takes over; in stalled the next origin accepts
// the stream and never answers, and upstream.response_timeout moves the
// relay on to a third.
func TestFaultOriginKilled(t *testing.T) {
	const clients, conns, late = 200, 4, 20
	for _, tc := range []struct {
		name    string
		stalled bool // a stalled origin between the killed one and the one that takes over
		restart bool // the killed origin comes back; no other origin
	}{
		{name: "restart", restart: true},
		{name: "failover"},
		{name: "stalled", stalled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := endpointNames("killed", 10)
			revs := revisions(names, 1)
			killed := newGCPOrigin(t)
			killed.setAll(resource.EndpointType, clas(revs))
			origins := []string{killed.addr}
			serving := killed
			if !tc.restart {
				if tc.stalled {
					origins = append(origins, newScriptedOrigin(t).addr) // answers nothing unless told
				}
				serving = newGCPOrigin(t)
				serving.setAll(resource.EndpointType, clas(revs))
				origins = append(origins, serving.addr)
			}
			r := startRelay(t, func(cfg *config.Config) {
				cfg.Log.Level = config.LogInfo
				cfg.Upstream.ResponseTimeout = 200 * time.Millisecond
			}, origins...)
			f := newFleet(t, r.XDSAddr(), "mixed", clients, conns)
			f.subscribe(resource.EndpointType, names...)
			f.waitRevisions(revs)
			f.settle()

			from := serving.deltaRequests()
			misses := relayMetric(t, r, "xds_relay_cache_misses_total", claType...)
			killed.stop()
			f.wantNothingResent(f.settle(), "origin killed")

			newcomers := newFleet(t, r.XDSAddr(), "mixed", late, 1)
			newcomers.subscribe(resource.EndpointType, names...)
			newcomers.waitRevisions(revs)
			if got := relayMetric(t, r, "xds_relay_cache_misses_total", claType...); got != misses {
				t.Errorf("cache misses while the origin was down: %v, want none: new clients are served from the cache", got-misses)
			}

			if tc.restart {
				killed.restart()
			}
			serving.waitDeltaSubscribed(from, resource.EndpointType, names)
			if tc.stalled {
				if n := relayMetric(t, r, "xds_relay_upstream_response_timeouts_total", "authority", dsAuthority); n < 1 {
					t.Errorf("response_timeouts_total = %v, want at least 1 (the stalled origin)", n)
				}
			}
			everyone := join(f, newcomers)
			everyone.wantNothingResent(everyone.settle(), "origin back")

			revs[names[3]] = 2
			serving.setAll(resource.EndpointType, clas(map[string]uint32{names[3]: 2}))
			everyone.wantOneResponse(everyone.recvChange(), resource.EndpointType, map[string]uint32{names[3]: 2})
			everyone.waitRevisions(revs)
			everyone.wantStreamsOpen()
		})
	}
}

// TestFaultOriginFlapping: the origin goes down and comes back ten times,
// each outage lasting a random number (2 to 5) of the relay's connection
// attempts, and changes one resource while it is down. Every connection
// attempt is seen at the origin's address (gatedListener): none comes
// sooner than the backoff allows (the k-th wait of an outage is at least
// (1-jitter)·initial·multiplier^k), each outage starts over from the
// initial wait (the stream before it had answered), and the relay counts
// each lost stream and each refused attempt in
// xds_relay_upstream_reconnects_total. After each return every client
// holds the origin's state (a deletion as far as its variant can say it);
// no client stream ends.
func TestFaultOriginFlapping(t *testing.T) {
	const flaps, clients = 10, 40
	bo := config.Backoff{Initial: 20 * time.Millisecond, Max: time.Second,
		Multiplier: config.DefaultBackoffMultiplier, Jitter: config.DefaultBackoffJitter}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	o, gate := newGatedOrigin(t)
	names := endpointNames("flap", flaps)
	revs := revisions(names, 1)
	o.setAll(resource.EndpointType, clas(revs))
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Upstream.Backoff = bo
	}, o.addr)
	f := newFleet(t, r.XDSAddr(), "mixed", clients, 2)
	f.subscribe(resource.EndpointType, names...)
	f.waitRevisions(revs)
	f.settle()

	refused := 0
	for i := range flaps {
		from, reqs := gate.count(), o.deltaRequests()
		down := time.Now()
		gate.down()
		last := i == flaps-1
		if last {
			o.del(resource.EndpointType, names[0])
		} else {
			revs[names[i]] = uint32(i + 2)
			o.setAll(resource.EndpointType, clas(map[string]uint32{names[i]: revs[names[i]]}))
		}
		gate.waitRefused(from, 2+rng.IntN(4))
		gate.up()
		o.waitDeltaSubscribed(reqs, resource.EndpointType, names)
		if last {
			// Delta clients are told it is gone; SotW clients of a
			// ClusterLoadAssignment with a NOT_FOUND resource error,
			// which this view does not apply: they keep what they had.
			deltas, sotws := f.byVariant()
			sotws.waitRevisions(revs)
			delete(revs, names[0])
			deltas.waitRevisions(revs)
		} else {
			f.waitRevisions(revs)
		}

		attempts := gate.refusedSince(from)
		refused += len(attempts)
		prev, wait := down, bo.Initial
		for k, at := range attempts {
			if low := time.Duration(float64(wait) * (1 - bo.Jitter)); at.Sub(prev) < low {
				t.Errorf("outage %d: attempt %d came %v after the one before, sooner than the backoff allows (%v at least)", i, k+1, at.Sub(prev), low)
			}
			prev, wait = at, min(time.Duration(float64(wait)*bo.Multiplier), bo.Max)
		}
		// Had the wait not started over, it would be near Max by now.
		if first := attempts[0].Sub(down); first >= bo.Max/2 {
			t.Errorf("outage %d: first attempt %v after the stream was lost, want about %v: the backoff did not start over", i, first, bo.Initial)
		}
		t.Logf("outage %d: %d attempts refused, waits %v", i, len(attempts), gaps(down, attempts))
	}
	f.wantNothingResent(f.settle(), "after the last flap")
	f.wantStreamsOpen()
	if got := relayMetric(t, r, "xds_relay_upstream_reconnects_total", "authority", dsAuthority); got != float64(flaps+refused) {
		t.Errorf("reconnects_total = %v, want %d (%d streams lost, %d attempts refused)", got, flaps+refused, flaps, refused)
	}
}

// gaps is the time from start to the first of ats, and between each of
// them and the next, rounded to the millisecond.
func gaps(start time.Time, ats []time.Time) []time.Duration {
	out := make([]time.Duration, len(ats))
	for i, at := range ats {
		out[i] = at.Sub(start).Round(time.Millisecond)
		start = at
	}
	return out
}

// TestFaultReconnectStorm: 2000 clients (delta and SotW, 20 connections)
// hold ten resources; their connections drop and 2000 clients connect
// again at once. The origin sees no new stream and no request at all (the
// relay still holds and subscribes what nobody watched for a moment), no
// subscription is a cache miss, and every client is whole again; the time
// that takes is logged.
func TestFaultReconnectStorm(t *testing.T) {
	const clients, conns = 2000, 20
	o := newGCPOrigin(t)
	names := endpointNames("storm", 10)
	revs := revisions(names, 1)
	o.setAll(resource.EndpointType, clas(revs))
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
	connect := func(t *testing.T) time.Duration {
		start := time.Now()
		f := newFleet(t, r.XDSAddr(), "mixed", clients, conns)
		f.subscribe(resource.EndpointType, names...)
		f.waitRevisions(revs)
		took := time.Since(start)
		f.settle()
		return took
	}
	// The first fleet's connections close when its subtest ends.
	if !t.Run("before", func(t *testing.T) { t.Logf("%d clients synced in %v", clients, connect(t)) }) {
		return
	}
	waitStreamsGone(t, r) // the storm finds no client watching
	opens, _ := o.streams()
	reqs := o.deltaRequests()
	misses := relayMetric(t, r, "xds_relay_cache_misses_total", claType...)

	took := connect(t)
	t.Logf("reconnect storm: %d clients whole again in %v", clients, took)
	nowOpens, _ := o.streams()
	opens, reqs = nowOpens-opens, o.deltaRequests()-reqs
	if opens != 0 || reqs != 0 {
		t.Errorf("origin saw %d new streams and %d requests during the storm, want none", opens, reqs)
	}
	if got := relayMetric(t, r, "xds_relay_cache_misses_total", claType...) - misses; got != 0 {
		t.Errorf("cache misses during the storm: %v, want none", got)
	}
}

// byVariant splits f into its delta and its SotW clients.
func (f *fleet) byVariant() (delta, sotw *fleet) {
	delta, sotw = &fleet{t: f.t}, &fleet{t: f.t}
	for _, c := range f.clients {
		if c.delta != nil {
			delta.clients = append(delta.clients, c)
		} else {
			sotw.clients = append(sotw.clients, c)
		}
	}
	return delta, sotw
}
