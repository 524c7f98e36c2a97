package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/upstream"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestStalledOriginFailedOver: an authority's first origin accepts the ADS
// stream and never answers. After upstream.response_timeout the relay fails
// over to the second origin and the client is served; the timeout is
// counted. Before, no client got anything (50 s and counting) and the
// second origin was never tried.
func TestStalledOriginFailedOver(t *testing.T) {
	stalled := newScriptedOrigin(t) // answers only what a test sends: nothing here
	o := newGCPOrigin(t)
	c := dsCluster("alive")
	o.set(resource.ClusterType, c, cluster(c, 1))
	r := startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.Upstream.ResponseTimeout = 200e6 // 200ms
	}, stalled.addr, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	subscribeClusters(t, d, c)
	if n := relayMetric(t, r, "xds_relay_upstream_response_timeouts_total", "authority", dsAuthority); n < 1 {
		t.Errorf("response_timeouts_total = %v, want at least 1", n)
	}

	// /debug/upstreams says so: the origin in use, open; the stall's error
	// cleared once the second origin answered (counted above, and logged).
	resp, err := http.Get("http://" + r.AdminAddr() + relayadmin.UpstreamsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var links []upstream.LinkStatus
	if err := json.NewDecoder(resp.Body).Decode(&links); err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 {
		t.Fatalf("/debug/upstreams: %+v, want one link", links)
	}
	l := links[0]
	if l.Authority != dsAuthority || l.Origin != o.addr || l.State != "open" || l.LastError != "" || l.LastErrorAt != nil ||
		l.Subscriptions[resource.ClusterType] != 1 || l.LastResponseAgeS == nil {
		t.Errorf("/debug/upstreams link: %+v", l)
	}
}

// TestReadyzFollowsUpstream: while a client's link has no origin that
// answers and nothing cached, /readyz is 503 naming the authority; once
// the origin answers it is 200, and it stays 200 when the origin goes away
// again, since the cache has state to serve.
func TestReadyzFollowsUpstream(t *testing.T) {
	o := newGCPOrigin(t)
	c := dsCluster("ready")
	o.set(resource.ClusterType, c, cluster(c, 1))
	o.stop()
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
	if code, _ := readyz(t, r); code != http.StatusOK {
		t.Fatalf("/readyz before any client: %d, want 200 (no link asked for yet)", code)
	}
	d := openDelta(t, dial(t, r.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}})
	waitReadyz := func(what string, want int, contains string) {
		t.Helper()
		xdstest.Poll(t, what, func() error {
			if code, body := readyz(t, r); code != want || !strings.Contains(body, contains) {
				return fmt.Errorf("/readyz %d %q, want %d containing %q", code, body, want, contains)
			}
			return nil
		})
	}
	waitReadyz("origin down, nothing cached", http.StatusServiceUnavailable, "upstream "+dsAuthority+": no origin has answered")
	o.restart()
	d.Recv()
	waitReadyz("origin answered", http.StatusOK, "ready")
	lost := relayMetric(t, r, "xds_relay_upstream_reconnects_total", "authority", dsAuthority)
	o.stop()
	// Read once the relay has seen the loss, or 200 would prove nothing.
	waitRelayMetric(t, r, "the origin's loss seen", func(v float64) bool { return v > lost },
		"xds_relay_upstream_reconnects_total", "authority", dsAuthority)
	if code, body := readyz(t, r); code != http.StatusOK {
		t.Errorf("/readyz with the origin gone but state cached: %d %q, want 200", code, body)
	}
}
