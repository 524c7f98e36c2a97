package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// The pages served by a relay built and started as the process does
// (relay.New, Start): real components behind every route.

// pageCase is a GET of path and what it answers.
type pageCase struct {
	name     string
	path     string
	wantCode int
	wantBody []string // substrings
}

// getPages asks base for each case's path, in a subtest by its name.
func getPages(t *testing.T, base string, tests []pageCase) {
	t.Helper()
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
}

// TestAdminEndpoints: the process's own routes, and 404 for the rest.
func TestAdminEndpoints(t *testing.T) {
	r := startRelay(t, testConfig(t))
	base := "http://" + r.AdminAddr()
	tests := []pageCase{
		{name: "healthz", path: "/healthz", wantCode: http.StatusOK, wantBody: []string{"ok\n"}},
		{name: "readyz", path: "/readyz", wantCode: http.StatusOK, wantBody: []string{"ready\n"}},
		{name: "metrics", path: "/metrics", wantCode: http.StatusOK, wantBody: []string{"xds_relay_ready 1", "# TYPE xds_relay_admin_requests_total counter"}},
		{name: "debug index", path: "/debug/", wantCode: http.StatusOK, wantBody: []string{
			`<a href="/metrics">`, `<a href="/healthz">`, `<a href="/readyz">`}},
		{name: "pprof is opt-in (admin_pprof)", path: "/debug/pprof/", wantCode: http.StatusNotFound},
		{name: "no REST-JSON polling on admin", path: "/v3/discovery:clusters", wantCode: http.StatusNotFound},
		{name: "unknown debug page", path: "/debug/nope", wantCode: http.StatusNotFound},
		{name: "unknown page", path: "/nope", wantCode: http.StatusNotFound},
	}
	getPages(t, base, tests)
	// The requests above were counted, by endpoint.
	_, body := get(t, base+"/metrics")
	if want := `xds_relay_admin_requests_total{code="200",handler="healthz"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// TestAdminPprofOptIn: pprof is served and listed only with admin_pprof.
func TestAdminPprofOptIn(t *testing.T) {
	c := testConfig(t)
	c.AdminPprof = true
	r := startRelay(t, c)
	base := "http://" + r.AdminAddr()
	if code, body := get(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine with admin_pprof = %d, want 200 with a profile:\n%s", code, body)
	}
	if _, body := get(t, base+"/debug/"); !strings.Contains(body, `<a href="/debug/pprof/">`) {
		t.Errorf("/debug/ does not list pprof with admin_pprof:\n%s", body)
	}
}

// TestJSONPages: every admin JSON page is written by writeJSON, with the
// headers each had when its component served it: application/json, and
// Cache-Control: no-store only on /debug/status and /debug/csds.
func TestJSONPages(t *testing.T) {
	r := startRelay(t, testConfig(t))
	base := "http://" + r.AdminAddr()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct {
		path      string
		noStore   bool
		bodyStart string
	}{
		{path: "/debug/upstreams", bodyStart: "[\n  {\n    \"authority\": \"auth.example\""},
		{path: "/debug/clients", bodyStart: "[]\n"},
		{path: "/debug/nacks", bodyStart: "{\n  \"total\": 0"},
		{path: "/debug/cache", bodyStart: "{\n  "},
		{path: "/debug/csds", noStore: true, bodyStart: "{\n  \"matched\": 0"},
		{path: admin.StatusPath, noStore: true, bodyStart: "{\n  "},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := client.Get(base + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if got := resp.Header.Get("Cache-Control") == "no-store"; got != tc.noStore {
				t.Errorf("Cache-Control %q, want no-store: %v", resp.Header.Get("Cache-Control"), tc.noStore)
			}
			if !strings.HasPrefix(string(body), tc.bodyStart) || !strings.HasSuffix(string(body), "\n") {
				t.Errorf("body %.200q, want it to start %q (indented JSON, one line feed at the end)", body, tc.bodyStart)
			}
		})
	}
}

// TestStatusPages: / is the status page (and only /), with its CSP and
// its own assets; /debug/status, /debug/cache, /debug/nacks and
// /debug/config answer, and /debug/ lists them.
func TestStatusPages(t *testing.T) {
	c := testConfig(t)
	c.Upstream.TLS = config.ClientTLS{Enabled: false, KeyFile: "/etc/relay/client.key", CertFile: "/etc/relay/client.pem"}
	r := startRelay(t, c)
	base := "http://" + r.AdminAddr()
	tests := []pageCase{
		{name: "status page", path: "/", wantCode: http.StatusOK, wantBody: []string{
			`<td>auth.example</td><td>127.0.0.1:19000</td>`, `<span id="clients-total">0</span>`,
			`<script src="/assets/status.js" defer></script>`, `id="cache-resources">0<`,
			// The cache figures' legend, served with the page.
			`<td class="legend">client subscriptions since start answered from the cache at once (hits), against those that waited for an origin (misses)</td>`}},
		{name: "not the status page", path: "/status", wantCode: http.StatusNotFound},
		{name: "script", path: admin.StatusJSPath, wantCode: http.StatusOK, wantBody: []string{`fetch("/debug/status"`}},
		{name: "style", path: admin.StatusCSSPath, wantCode: http.StatusOK, wantBody: []string{"td.err"}},
		{name: "status JSON", path: admin.StatusPath, wantCode: http.StatusOK, wantBody: []string{`"name": "auth.example"`, `"ready": "ready"`, `"hit_ratio": 0`}},
		{name: "cache", path: "/debug/cache?prefix=x&limit=5", wantCode: http.StatusOK, wantBody: []string{`"limit": 5`, `"truncated": false`}},
		{name: "cache bad limit", path: "/debug/cache?limit=-1", wantCode: http.StatusBadRequest, wantBody: []string{`limit: "-1" is not an integer from 1 to 10000`}},
		{name: "nacks", path: "/debug/nacks", wantCode: http.StatusOK, wantBody: []string{`"total": 0`}},
		{name: "config", path: "/debug/config", wantCode: http.StatusOK, wantBody: []string{"name: auth.example", "key_file: /etc/relay/client.key"}},
		{name: "config json", path: "/debug/config?format=json", wantCode: http.StatusOK, wantBody: []string{`"key_file": "/etc/relay/client.key"`}},
		{name: "config bad format", path: "/debug/config?format=xml", wantCode: http.StatusBadRequest, wantBody: []string{`format "xml" is not one of yaml, json`}},
		{name: "index lists them", path: "/debug/", wantCode: http.StatusOK, wantBody: []string{
			`<a href="/">`, `<a href="/debug/status">`, `<a href="/debug/cache">`, `<a href="/debug/nacks">`, `<a href="/debug/config">`}},
	}
	getPages(t, base, tests)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("status page CSP %q", csp)
	}
	_, body := get(t, base+admin.StatusPath)
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%s: %v", admin.StatusPath, err)
	}
	if len(st.Authorities) != 1 || st.Authorities[0].Links != 0 || st.Clients.Total != 0 || st.Nacks.Recent == nil {
		t.Errorf("status %+v", st)
	}
}

// TestDeliveryEndpoints: /debug/delivery answers with the settings in
// effect; the release endpoint takes POST only, refuses an authority that
// is not configured, and answers with what it released.
func TestDeliveryEndpoints(t *testing.T) {
	r := startRelay(t, testConfig(t))
	base := "http://" + r.AdminAddr()
	code, body := get(t, base+admin.DeliveryPath)
	for _, want := range []string{`"held": []`, `"authority": "auth.example"`, `"max_removed_share": 0.5`, `"release_after": "0s"`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d, lacks %s:\n%s", admin.DeliveryPath, code, want, body)
		}
	}
	if code, _ := get(t, base+admin.DeliveryReleasePath); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", admin.DeliveryReleasePath, code)
	}
	for _, tc := range []struct {
		query    string
		wantCode int
		wantBody string
	}{
		{"?authority=nope.example", http.StatusBadRequest, `authority "nope.example" is not configured`},
		{"?authority=auth.example&type=envoy.config.cluster.v3.Cluster", http.StatusOK, `"released": []`},
		{"", http.StatusOK, `"released": []`},
	} {
		code, body := post(t, base+admin.DeliveryReleasePath+tc.query)
		if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
			t.Errorf("POST %s%s = %d %q, want %d %q", admin.DeliveryReleasePath, tc.query, code, body, tc.wantCode, tc.wantBody)
		}
	}
}

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(url, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
