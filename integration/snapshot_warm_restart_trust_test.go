package integration

import (
	"os"
	"testing"

	"github.com/xds-relay/xds-relay/config"
)

// TestWarmRestartUntrustedSnapshot: a snapshot that another user could
// have written (owned by another user, or writable by its group or by
// anyone) is not loaded, although its content checks out: the relay
// starts empty while the origin is down, and says why in
// xds_relay_cache_snapshot_loads_total{result="untrusted"}. (A FIFO at the
// path, which must not block the start, is tested with the binary:
// cmd/xds-relay TestServeSnapshotFIFO.)
func TestWarmRestartUntrustedSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  bool // needs to run as root (chown)
		spoil func(t *testing.T, path string)
	}{
		{name: "owned by another user", root: true, spoil: func(t *testing.T, path string) {
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "group writable", spoil: func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o620); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "writable by anyone", spoil: func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o602); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			w := newWarmSetup(t)
			w.firstRun(t, true)
			tc.spoil(t, w.path)
			w.o.stop()
			b := w.relay(t, true, func(cfg *config.Config) { cfg.Log.Level = config.LogDebug })
			if n := relayMetric(t, b, "xds_relay_cache_snapshot_loads_total", "result", "untrusted"); n != 1 {
				t.Errorf("snapshot_loads_total{result=untrusted} = %v, want 1 (loaded: %v)", n,
					relayMetric(t, b, "xds_relay_cache_snapshot_loads_total", "result", "loaded"))
			}
			if n := relayMetric(t, b, "xds_relay_cache_resources"); n != 0 {
				t.Errorf("cache holds %v resources from an untrusted snapshot, want 0", n)
			}
		})
	}
}
