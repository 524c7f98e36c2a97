package integration

import (
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
