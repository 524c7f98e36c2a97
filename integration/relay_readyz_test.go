package integration

import (
	"net/http"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/upstream"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// readyzResponseTimeout is upstream.response_timeout in these tests: far
// longer than the tests wait (xdstest.WaitTimeout), so readiness cannot
// come from the liveness probe that the timeout starts.
const readyzResponseTimeout = time.Minute

// TestReadyzMissingName: a fresh relay whose first client asks only for a
// name the healthy origin lacks (a typo in one client's config) is ready
// at once: the origin accepted the connection and the stream, and an
// origin need not answer a name it lacks. The link stays "waiting" (no
// answer, no probe yet) and /readyz is 200. Before, /readyz was 503 until
// the liveness probe answered, after response_timeout (9.9 s at the
// default), and a rolling restart took such pods out of rotation.
func TestReadyzMissingName(t *testing.T) {
	present, missing := dsCluster("present"), dsCluster("typo")
	for _, tc := range []struct {
		transport string
		origin    func(t *testing.T) *gcpOrigin
	}{
		{xdstype.TransportDelta, func(t *testing.T) *gcpOrigin {
			o := newGCPOrigin(t)
			o.set(resource.ClusterType, present, cluster(present, 1))
			return o
		}},
		{xdstype.TransportSotW, func(t *testing.T) *gcpOrigin {
			o := newSnapshotOrigin(t)
			o.setSnapshot("1", map[resource.Type][]types.Resource{resource.ClusterType: {cluster(present, 1)}})
			return o
		}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			o := tc.origin(t)
			r := startRelay(t, func(cfg *config.Config) {
				cfg.Log.Level = config.LogInfo
				cfg.Authorities[0].Transport = tc.transport
				cfg.Upstream.ResponseTimeout = readyzResponseTimeout
			}, o.addr)
			d := openDelta(t, dial(t, r.XDSAddr()))
			d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{missing}})
			// The link exists (before, /readyz is 200 for want of one) and
			// its stream is open on the origin.
			upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return l.State == "waiting" })
			waitReadyz(t, r, "ready while the origin is silent about the missing name", http.StatusOK)
			if l := upstreamLink(t, r, dsAuthority, func(upstream.LinkStatus) bool { return true }); l.State != "waiting" || l.LastError != "" {
				t.Errorf("link %+v, want waiting with no error: ready before any answer or probe", l)
			}
		})
	}
}

// TestReadyzDeadOrigin: what makes a relay with nothing cached unready
// stays so: an origin that refuses the connection, and one that accepts
// the stream but answers neither the names nor the liveness probe (a
// stall, found after response_timeout twice); after the stall the next
// attempt's open stream is no evidence until it answers.
func TestReadyzDeadOrigin(t *testing.T) {
	c := dsCluster("dead")
	t.Run("refused", func(t *testing.T) {
		o := newGCPOrigin(t)
		o.stop()
		r := startRelay(t, func(cfg *config.Config) {
			cfg.Log.Level = config.LogInfo
			cfg.Upstream.ResponseTimeout = readyzResponseTimeout
		}, o.addr)
		d := openDelta(t, dial(t, r.XDSAddr()))
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}})
		upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return l.LastError != "" })
		waitReadyz(t, r, "unready: the origin refuses the connection", http.StatusServiceUnavailable)
	})
	t.Run("stalled", func(t *testing.T) {
		stalled := newScriptedOrigin(t) // answers only what a test sends: nothing here
		r := startRelay(t, func(cfg *config.Config) {
			cfg.Log.Level = config.LogInfo
			cfg.Upstream.ResponseTimeout = 200 * time.Millisecond
		}, stalled.addr)
		d := openDelta(t, dial(t, r.XDSAddr()))
		d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}})
		waitRelayMetric(t, r, "the stall found", func(v float64) bool { return v >= 1 },
			"xds_relay_upstream_response_timeouts_total", "authority", dsAuthority)
		waitReadyz(t, r, "unready: the origin stalled", http.StatusServiceUnavailable)
		// The next attempts open streams on the same stalled origin: no
		// evidence until it answers.
		waitRelayMetric(t, r, "a second stall", func(v float64) bool { return v >= 2 },
			"xds_relay_upstream_response_timeouts_total", "authority", dsAuthority)
		if code, body := readyz(t, r); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz after the second stall: %d %q, want 503", code, body)
		}
	})
}
