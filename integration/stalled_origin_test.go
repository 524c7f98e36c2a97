package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/upstream"
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

	// /debug/upstreams says so: the origin in use, the last error.
	resp, err := http.Get("http://" + r.AdminAddr() + upstream.UpstreamsPath)
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
	if l.Authority != dsAuthority || l.Origin != o.addr || l.State != "open" || !strings.Contains(l.LastError, "did not answer") ||
		l.Subscriptions[resource.ClusterType] != 1 || l.LastResponseAgeS == nil {
		t.Errorf("/debug/upstreams link: %+v", l)
	}
}
