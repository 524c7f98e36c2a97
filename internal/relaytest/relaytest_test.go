package relaytest

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// TestRunServesUntilTheTestEnds: Run's relay is bound and serving while
// the test runs, and its cleanup closes it: nothing it started is left
// once the (sub)test has ended.
func TestRunServesUntilTheTestEnds(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0") // an origin that accepts and serves nothing
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	t.Run("relay", func(t *testing.T) {
		cfg := config.Default()
		cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
		cfg.ShutdownGracePeriod, cfg.Downstream.DrainDelay = time.Second, 0
		cfg.Authorities = []config.Authority{{Name: "auth.example", Origins: []string{lis.Addr().String()},
			Transport: xdstype.TransportDelta, GlobCollections: config.GlobNative}}
		r := Run(t, cfg, nil, prometheus.NewRegistry())
		for _, addr := range []string{r.XDSAddr(), r.AdminAddr()} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial %q: %v", addr, err)
			}
			c.Close()
		}
	})
	goleak.VerifyNone(t)
}
