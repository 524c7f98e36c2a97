package admin

import "testing"

func TestStatusFormatting(t *testing.T) {
	age := 2.25
	for _, tc := range []struct{ got, want string }{
		{formatBytes(1000), "1000 B"},
		{formatBytes(1536), "1.5 KiB (1536 B)"},
		{formatBytes(3 << 30), "3.0 GiB (3221225472 B)"},
		{formatAge(nil), "never"},
		{formatAge(&age), "2.2s ago"},
		{formatCounts(map[string]int{"type.googleapis.com/envoy.config.cluster.v3.Cluster": 2, "envoy.config.cluster.v3.Cluster": 1, "other": 4}, true), "Cluster: 3, other: 4"},
		{formatCounts(map[string]int{"open": 1, "backoff": 2}, false), "backoff: 2, open: 1"},
		{formatRatio(CacheStatus{}), "n/a (no subscriptions yet)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
