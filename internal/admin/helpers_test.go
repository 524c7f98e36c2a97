package admin_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/relaytest"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is a valid config on loopback port 0.
func testConfig(t *testing.T) *config.Config {
	t.Helper()
	c := config.Default()
	c.Listen = "127.0.0.1:0"
	c.Admin = "127.0.0.1:0"
	c.Authorities = []config.Authority{{Name: "auth.example", Origins: []string{"127.0.0.1:19000"},
		Transport: xdstype.TransportDelta, GlobCollections: config.GlobNative}}
	c.ShutdownGracePeriod = 5 * time.Second
	c.Downstream.DrainDelay = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("test config invalid: %v", err)
	}
	return c
}

// startRelay builds and starts a relay, as the process does, that the
// test's cleanup closes: the admin pages are served by its wiring. The
// config is not validated again (TestStatusPages shows one Validate
// refuses).
func startRelay(t *testing.T, c *config.Config) *relay.Relay {
	t.Helper()
	return relaytest.Start(t, c, zaptest.NewLogger(t), prometheus.NewRegistry())
}

// get fetches url over real HTTP (no pooled connections left behind).
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}
