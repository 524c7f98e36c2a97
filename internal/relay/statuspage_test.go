package relay

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/config"
)

// TestStatusPages: / is the status page (and only /), with its CSP and
// its own assets; /debug/status, /debug/cache, /debug/nacks and
// /debug/config answer, and /debug/ lists them.
func TestStatusPages(t *testing.T) {
	c := testConfig(t)
	c.Upstream.TLS = config.ClientTLS{Enabled: false, KeyFile: "/etc/relay/client.key", CertFile: "/etc/relay/client.pem"}
	r := startRelay(t, c)
	base := "http://" + r.AdminAddr()
	tests := []struct {
		name     string
		path     string
		wantCode int
		wantBody []string // substrings
	}{
		{name: "status page", path: "/", wantCode: http.StatusOK, wantBody: []string{
			`<td>auth.example</td><td>127.0.0.1:19000</td>`, `<span id="clients-total">0</span>`,
			`<script src="/assets/status.js" defer></script>`, `id="cache-resources">0<`,
			// The cache figures' legend, served with the page.
			`<td class="legend">client subscriptions since start answered from the cache at once (hits), against those that waited for an origin (misses)</td>`}},
		{name: "not the status page", path: "/status", wantCode: http.StatusNotFound},
		{name: "script", path: statusJSPath, wantCode: http.StatusOK, wantBody: []string{`fetch("/debug/status"`}},
		{name: "style", path: statusCSSPath, wantCode: http.StatusOK, wantBody: []string{"td.err"}},
		{name: "status JSON", path: StatusPath, wantCode: http.StatusOK, wantBody: []string{`"name": "auth.example"`, `"ready": "ready"`, `"hit_ratio": 0`}},
		{name: "cache", path: "/debug/cache?prefix=x&limit=5", wantCode: http.StatusOK, wantBody: []string{`"limit": 5`, `"truncated": false`}},
		{name: "cache bad limit", path: "/debug/cache?limit=-1", wantCode: http.StatusBadRequest, wantBody: []string{`limit: "-1" is not an integer from 1 to 10000`}},
		{name: "nacks", path: "/debug/nacks", wantCode: http.StatusOK, wantBody: []string{`"total": 0`}},
		{name: "config", path: "/debug/config", wantCode: http.StatusOK, wantBody: []string{"name: auth.example", "key_file: /etc/relay/client.key"}},
		{name: "config json", path: "/debug/config?format=json", wantCode: http.StatusOK, wantBody: []string{`"key_file": "/etc/relay/client.key"`}},
		{name: "config bad format", path: "/debug/config?format=xml", wantCode: http.StatusBadRequest, wantBody: []string{`format "xml" is not one of yaml, json`}},
		{name: "index lists them", path: "/debug/", wantCode: http.StatusOK, wantBody: []string{
			`<a href="/">`, `<a href="/debug/status">`, `<a href="/debug/cache">`, `<a href="/debug/nacks">`, `<a href="/debug/config">`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, base+tt.path)
			if code != tt.wantCode {
				t.Errorf("GET %s = %d, want %d; body:\n%s", tt.path, code, tt.wantCode, body)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("GET %s body lacks %q:\n%s", tt.path, want, body)
				}
			}
		})
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("status page CSP %q", csp)
	}
	_, body := get(t, base+StatusPath)
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%s: %v", StatusPath, err)
	}
	if len(st.Authorities) != 1 || st.Authorities[0].Links != 0 || st.Clients.Total != 0 || st.Nacks.Recent == nil {
		t.Errorf("status %+v", st)
	}
}

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
