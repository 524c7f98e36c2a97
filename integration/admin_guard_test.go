package integration

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// adminCall is one admin request with the headers a browser would set.
type adminCall struct {
	method, path string
	host         string            // the Host header; "": the admin address
	header       map[string]string // Origin, Sec-Fetch-Site
}

// do sends c to the relay's admin listener: status, body and the Allow
// header.
func (c adminCall) do(t *testing.T, r *relayproc.Relay) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(c.method, "http://"+r.AdminAddr()+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Allow")
}

// TestAdminTrust: what the admin listener trusts (docs/operations.md). A
// request naming a Host that is not an IP literal, localhost or a name in
// admin_allowed_hosts is refused (DNS rebinding cannot read the debug
// pages); a state-changing request a browser marks cross-origin (Origin,
// Sec-Fetch-Site) is refused and changes nothing; state changes only by
// the documented method. Clients that are not browsers, and pages of the
// admin's own origin, are served.
func TestAdminTrust(t *testing.T) {
	o := newGCPOrigin(t)
	path := filepath.Join(t.TempDir(), "relay.yaml")
	cfgFile := func(allowed string) string {
		return reloadConfig([][2]string{{"a.example", o.addr}}, "log: {level: warn}\nadmin_allowed_hosts: ["+allowed+"]\n")
	}
	replaceFile(t, path, cfgFile("relay.example"))
	r, reg := fileRelay(t, path)
	_, port, err := net.SplitHostPort(r.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	own := "http://" + r.AdminAddr()
	crossSite := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}

	steps := []struct {
		name     string
		call     adminCall
		wantCode int
		wantBody string
		wantAll  string // Allow header
	}{
		{name: "rebound name reads config", call: adminCall{method: "GET", path: "/debug/config", host: "evil.example:" + port}, wantCode: 403, wantBody: "admin_allowed_hosts"},
		{name: "rebound name reads clients", call: adminCall{method: "GET", path: "/debug/clients", host: "evil.example"}, wantCode: 403},
		{name: "rebound name reads cache", call: adminCall{method: "GET", path: "/debug/cache", host: "evil.example:" + port}, wantCode: 403},
		{name: "rebound name reads the status page", call: adminCall{method: "GET", path: "/", host: "evil.example:" + port}, wantCode: 403},
		{name: "rebound name reloads", call: adminCall{method: "POST", path: relayadmin.ReloadPath, host: "evil.example:" + port}, wantCode: 403},
		{name: "a suffix of an allowed name", call: adminCall{method: "GET", path: "/debug/config", host: "x.relay.example"}, wantCode: 403},
		{name: "IPv4 literal", call: adminCall{method: "GET", path: "/debug/config"}, wantCode: 200},
		{name: "IPv6 literal", call: adminCall{method: "GET", path: "/debug/config", host: "[::1]:" + port}, wantCode: 200},
		{name: "localhost", call: adminCall{method: "GET", path: "/debug/config", host: "LocalHost:" + port}, wantCode: 200},
		{name: "allowed name", call: adminCall{method: "GET", path: "/debug/clients", host: "relay.example:" + port}, wantCode: 200},
		{name: "cross-site reload", call: adminCall{method: "POST", path: relayadmin.ReloadPath, header: crossSite}, wantCode: 403, wantBody: "cross-origin"},
		{name: "reload from another origin, no Sec-Fetch-Site", call: adminCall{method: "POST", path: relayadmin.ReloadPath, header: map[string]string{"Origin": "http://evil.example"}}, wantCode: 403},
		{name: "reload from another port of the host", call: adminCall{method: "POST", path: relayadmin.ReloadPath, header: map[string]string{"Origin": "http://127.0.0.1:1"}}, wantCode: 403},
		{name: "cross-site log level", call: adminCall{method: "PUT", path: relayadmin.LogLevelPath + "?level=debug", header: crossSite}, wantCode: 403},
		{name: "log level by POST", call: adminCall{method: "POST", path: relayadmin.LogLevelPath + "?level=debug"}, wantCode: 405, wantAll: "GET, PUT"},
		{name: "reload by GET", call: adminCall{method: "GET", path: relayadmin.ReloadPath}, wantCode: 405, wantAll: "POST"},
		{name: "log level unchanged", call: adminCall{method: "GET", path: relayadmin.LogLevelPath}, wantCode: 200, wantBody: "warn\n"},
	}
	for _, s := range steps {
		code, body, allow := s.call.do(t, r)
		if code != s.wantCode || !strings.Contains(body, s.wantBody) || allow != s.wantAll {
			t.Errorf("%s: %s %s (Host %q, %v) = %d %q (Allow %q), want %d %q (Allow %q)", s.name, s.call.method, s.call.path,
				s.call.host, s.call.header, code, body, allow, s.wantCode, s.wantBody, s.wantAll)
		}
	}
	if n := gathered(t, reg, "xds_relay_config_reloads_total", "result", "ok"); n != 0 {
		t.Errorf("config_reloads_total{result=ok} = %v after refused requests only, want 0", n)
	}

	// The admin's own origin, and clients that are not browsers, change
	// state; a reload applies a new admin_allowed_hosts.
	replaceFile(t, path, cfgFile("other.example"))
	for _, c := range []adminCall{
		{method: "PUT", path: relayadmin.LogLevelPath + "?level=debug", header: map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin"}},
		{method: "POST", path: relayadmin.ReloadPath, header: map[string]string{"Origin": own}},
	} {
		if code, body, _ := c.do(t, r); code != 200 {
			t.Errorf("%s %s from the admin's own origin = %d %q, want 200", c.method, c.path, code, body)
		}
	}
	if n := gathered(t, reg, "xds_relay_config_reloads_total", "result", "ok"); n != 1 {
		t.Errorf("config_reloads_total{result=ok} = %v, want 1", n)
	}
	for host, want := range map[string]int{"relay.example": 403, "other.example:" + port: 200} {
		if code, body, _ := (adminCall{method: "GET", path: "/debug/config", host: host}).do(t, r); code != want {
			t.Errorf("after the reload, Host %s: %d %q, want %d", host, code, body, want)
		}
	}
}
