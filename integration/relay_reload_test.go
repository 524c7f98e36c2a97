package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/config"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/upstream"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// reloadConfig is a relay config file serving authorities (name → origin),
// with extra YAML appended; a downstream: line in extra replaces the
// default one.
func reloadConfig(auths [][2]string, extra string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nshutdown_grace_period: 2s\n")
	if !strings.Contains(extra, "downstream:") {
		b.WriteString("downstream: {drain_delay: 0s}\n")
	}
	b.WriteString("upstream: {backoff: {initial: 20ms, max: 200ms}}\nauthorities:\n")
	for _, a := range auths {
		fmt.Fprintf(&b, "  - {name: %q, origins: [%q]}\n", a[0], a[1])
	}
	b.WriteString(extra)
	return b.String()
}

// fileRelay runs a relay (runRelay) from a config file, so that it can
// reload it, with the process logger (NewLogger: its level can change).
func fileRelay(t *testing.T, path string) (*relayproc.Relay, *prometheus.Registry) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := relayproc.NewLogger(cfg.Log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := runRelayLogging(t, cfg, lg)
	return r, relayRegistry(t, r)
}

// replaceFile replaces path by rename, as config management does.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	writeFileAtomic(t, path, []byte(content))
}

// postReload asks r to reload its config file and fails the test unless
// it answers 200.
func postReload(t *testing.T, r *relayproc.Relay) {
	t.Helper()
	if code, body := adminDo(t, http.MethodPost, "http://"+r.AdminAddr()+relayadmin.ReloadPath, ""); code != http.StatusOK {
		t.Fatalf("POST reload = %d %s, want 200", code, body)
	}
}

// adminDo makes an admin request and returns its status and body.
func adminDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReloadChangesOnlyWhatItAffects is issue #12's reload test: a reload
// that moves authority b to another origin restarts only b's upstream
// link; a's clients keep their stream and their updates, a's origin sees
// no new stream, b's clients are served the new origin's resources through
// the streams they have. A lowered bound applies to new requests. A file
// that does not validate, or changes a field that needs a restart, is
// refused with 400 and changes nothing. Removing b answers b's names as
// not existing, as for any unknown authority.
func TestReloadChangesOnlyWhatItAffects(t *testing.T) {
	a1 := xdstpName("a.example", "envoy.config.cluster.v3.Cluster", "a1")
	b1 := xdstpName("b.example", "envoy.config.cluster.v3.Cluster", "b1")
	oA, oB1, oB2 := newGCPOrigin(t), newGCPOrigin(t), newGCPOrigin(t)
	oA.set(resource.ClusterType, a1, cluster(a1, 1))
	oB1.set(resource.ClusterType, b1, cluster(b1, 1))
	oB2.set(resource.ClusterType, b1, cluster(b1, 2))
	path := filepath.Join(t.TempDir(), "relay.yaml")
	replaceFile(t, path, reloadConfig([][2]string{{"a.example", oA.addr}, {"b.example", oB1.addr}}, ""))
	r, reg := fileRelay(t, path)
	reload := "http://" + r.AdminAddr() + relayadmin.ReloadPath

	conn := dial(t, r.XDSAddr())
	ca := newADSClient(t, conn, "delta", "client-a", "c", nil)
	ca.subscribe(resource.ClusterType, a1)
	ca.waitTimeout(a1, 1)
	cb := newADSClient(t, conn, "delta", "client-b", "c", nil)
	cb.subscribe(resource.ClusterType, b1)
	cb.waitTimeout(b1, 1)
	aStreams, _ := oA.streams()

	// b moves to another origin; max_names_per_stream is lowered.
	replaceFile(t, path, reloadConfig([][2]string{{"a.example", oA.addr}, {"b.example", oB2.addr}},
		"downstream: {drain_delay: 0s, limits: {max_names_per_stream: 2}}\n"))
	postReload(t, r)
	cb.waitTimeout(b1, 2) // the new origin's b1, through the same stream
	oA.set(resource.ClusterType, a1, cluster(a1, 3))
	ca.waitTimeout(a1, 3) // a's client keeps its stream and its updates
	if now, _ := oA.streams(); now != aStreams {
		t.Errorf("a's origin saw %d new streams, want 0: a's link was restarted", now-aStreams)
	}

	// The lowered bound applies to new requests.
	over := openDelta(t, conn)
	over.Send(&discoveryv3.DeltaDiscoveryRequest{Node: ca.node, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{a1, b1, xdstpName("a.example", "envoy.config.cluster.v3.Cluster", "a2")}})
	if st := over.Err(); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "max_names_per_stream") {
		t.Errorf("3 names after lowering the limit to 2: %v, want ResourceExhausted naming max_names_per_stream", st)
	}

	// Refused: a file that does not validate, a field that needs a restart.
	for _, tc := range []struct{ name, file, want string }{
		{"invalid", reloadConfig([][2]string{{"a.example", oA.addr}}, "cache: {max_resources: -1}\n"), "cache.max_resources"},
		{"not yaml", "authorities: [", "relay.yaml"},
		{"needs a restart", strings.Replace(reloadConfig([][2]string{{"a.example", oA.addr}}, ""), "listen: 127.0.0.1:0", "listen: 127.0.0.1:1", 1),
			"listen: changing it needs a restart"},
	} {
		replaceFile(t, path, tc.file)
		code, body := adminDo(t, http.MethodPost, reload, "")
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: POST reload = %d %q, want 400 naming %q", tc.name, code, body, tc.want)
		}
	}
	if got := gathered(t, reg, "xds_relay_config_reloads_total", "result", "invalid"); got != 3 {
		t.Errorf("reloads_total{invalid} = %v, want 3", got)
	}
	// Nothing changed: b still served from its new origin, a from its own.
	oB2.set(resource.ClusterType, b1, cluster(b1, 4))
	cb.waitTimeout(b1, 4)

	// b removed: its client is told b1 does not exist; a goes on.
	replaceFile(t, path, reloadConfig([][2]string{{"a.example", oA.addr}}, ""))
	postReload(t, r)
	gone, cancel := context.WithTimeout(context.Background(), xdstest.WaitTimeout)
	defer cancel()
	for len(cb.names(resource.ClusterType)) > 0 {
		if _, ok := cb.recvOne(gone.Done()); !ok {
			t.Fatalf("b's client still holds %v after b was removed", cb.names(resource.ClusterType))
		}
	}
	b2 := xdstpName("b.example", "envoy.config.cluster.v3.Cluster", "b2")
	cb.subscribe(resource.ClusterType, b2) // as a name of an unknown authority is
	if got, _ := cb.recvOne(gone.Done()); len(got.removed) != 1 || got.removed[0] != b2 {
		t.Errorf("a new name of the removed authority: got %+v, want it in removed_resources", got)
	}
	oA.set(resource.ClusterType, a1, cluster(a1, 5))
	ca.waitTimeout(a1, 5)
	if got := gathered(t, reg, "xds_relay_config_reloads_total", "result", "ok"); got != 2 {
		t.Errorf("reloads_total{ok} = %v, want 2", got)
	}
	if got := gathered(t, reg, "xds_relay_config_last_reload_success_timestamp_seconds"); time.Since(time.Unix(int64(got), 0)) > time.Minute {
		t.Errorf("last_reload_success_timestamp_seconds = %v, want about now", got)
	}
}

// TestLogLevelAtRunTime: GET /debug/log_level shows the level, PUT sets it
// (query or body), a bad level is refused with 400.
func TestLogLevelAtRunTime(t *testing.T) {
	o := newGCPOrigin(t)
	path := filepath.Join(t.TempDir(), "relay.yaml")
	replaceFile(t, path, reloadConfig([][2]string{{"a.example", o.addr}}, "log: {level: warn}\n"))
	r, _ := fileRelay(t, path)
	url := "http://" + r.AdminAddr() + relayadmin.LogLevelPath
	steps := []struct {
		method, query, body string
		wantCode            int
		wantBody            string
	}{
		{http.MethodGet, "", "", 200, "warn\n"},
		{http.MethodPut, "?level=debug", "", 200, "debug\n"},
		{http.MethodGet, "", "", 200, "debug\n"},
		{http.MethodPut, "", "error", 200, "error\n"},
		{http.MethodPut, "", `{"level":"info"}`, 200, "info\n"},
		{http.MethodPut, "?level=loud", "", 400, `log level "loud" is not one of debug, info, warn, error`},
		{http.MethodGet, "", "", 200, "info\n"},
		{http.MethodDelete, "", "", 405, ""},
	}
	for i, s := range steps {
		code, body := adminDo(t, s.method, url+s.query, s.body)
		if code != s.wantCode || !strings.Contains(body, s.wantBody) {
			t.Errorf("step %d: %s %s%s = %d %q, want %d %q", i, s.method, url, s.query, code, body, s.wantCode, s.wantBody)
		}
	}
	// A reload that changes log.level applies it.
	replaceFile(t, path, reloadConfig([][2]string{{"a.example", o.addr}}, "log: {level: debug}\n"))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, body := adminDo(t, http.MethodGet, url, ""); body != "debug\n" {
		t.Errorf("after a reload to debug: %q", body)
	}
}

// TestReloadAccessRules: a reload that narrows an authority's allow list
// ends, with PermissionDenied, the streams holding what the new rules deny,
// and only those: a client the new rules still allow, and a client of
// another authority, keep their streams and their updates.
func TestReloadAccessRules(t *testing.T) {
	a1 := xdstpName("a.example", "envoy.config.cluster.v3.Cluster", "a1")
	b1 := xdstpName("b.example", "envoy.config.cluster.v3.Cluster", "b1")
	oA, oB := newGCPOrigin(t), newGCPOrigin(t)
	oA.set(resource.ClusterType, a1, cluster(a1, 1))
	oB.set(resource.ClusterType, b1, cluster(b1, 1))
	withAllow := func(patterns ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "  - name: b.example\n    origins: [%q]\n    allow:\n", oB.addr)
		for _, p := range patterns {
			fmt.Fprintf(&b, "      - node_cluster: %q\n", p)
		}
		return reloadConfig([][2]string{{"a.example", oA.addr}}, b.String())
	}
	path := filepath.Join(t.TempDir(), "relay.yaml")
	replaceFile(t, path, withAllow("prod-*", "canary-*"))
	r, reg := fileRelay(t, path)

	conn := dial(t, r.XDSAddr())
	prod := newADSClient(t, conn, "delta", "prod", "prod-1", nil)
	prod.subscribe(resource.ClusterType, b1)
	prod.waitTimeout(b1, 1)
	canary := newADSClient(t, conn, "delta", "canary", "canary-1", nil)
	canary.subscribe(resource.ClusterType, b1)
	canary.waitTimeout(b1, 1)
	other := newADSClient(t, conn, "sotw", "other", "canary-1", nil)
	other.subscribe(resource.ClusterType, a1)
	other.waitTimeout(a1, 1)

	replaceFile(t, path, withAllow("prod-*"))
	postReload(t, r)
	if st := canary.delta.Err(); st.Code() != codes.PermissionDenied || strings.Contains(st.Message(), "b1") {
		t.Errorf("canary after its cluster lost access: %v, want PermissionDenied that does not name the resource", st)
	}
	if got := gathered(t, reg, "xds_relay_downstream_access_denied_total", "authority", "b.example"); got != 1 {
		t.Errorf("access_denied_total{authority=b.example} = %v, want 1", got)
	}
	oB.set(resource.ClusterType, b1, cluster(b1, 2))
	prod.waitTimeout(b1, 2) // still allowed: same stream, next update
	oA.set(resource.ClusterType, a1, cluster(a1, 2))
	other.waitTimeout(a1, 2) // another authority: untouched

	// The client reconnects and is answered as the new rules say.
	again := newADSClient(t, conn, "delta", "canary", "canary-1", nil)
	again.subscribe(resource.ClusterType, b1)
	if st := again.delta.Err(); st.Code() != codes.PermissionDenied {
		t.Errorf("canary reconnecting: %v, want PermissionDenied", st)
	}
}

// TestReloadUpstreamTLS: an authority whose origin needs a CA the config
// forgot fails its handshakes (last_error says why); a reload that adds
// the CA restarts only that authority's link, and the client waiting on
// it is answered through the stream it has. Another authority's link and
// client are untouched.
func TestReloadUpstreamTLS(t *testing.T) {
	ca := xdstest.NewCA(t, "reload-ca")
	gate := newOriginGate(ca.Server("origin"), ca)
	oTLS, oPlain := newGCPOriginWith(t, gate.serverOpts), newGCPOrigin(t)
	s1 := xdstpName("s.example", "envoy.config.cluster.v3.Cluster", "s1")
	p1 := xdstpName("p.example", "envoy.config.cluster.v3.Cluster", "p1")
	oTLS.set(resource.ClusterType, s1, cluster(s1, 1))
	oPlain.set(resource.ClusterType, p1, cluster(p1, 1))
	files := newTLSFiles(t, ca, ca.Client("relay"))
	withTLS := func(caFile string) string {
		return reloadConfig([][2]string{{"p.example", oPlain.addr}}, fmt.Sprintf(
			"  - name: s.example\n    origins: [%q]\n    tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}\n",
			oTLS.addr, caFile, files.cert, files.key))
	}
	path := filepath.Join(t.TempDir(), "relay.yaml")
	replaceFile(t, path, withTLS("")) // the system roots: the origin's CA is not among them
	r, _ := fileRelay(t, path)

	conn := dial(t, r.XDSAddr())
	plain := newADSClient(t, conn, "delta", "plain", "c", nil)
	plain.subscribe(resource.ClusterType, p1)
	plain.waitTimeout(p1, 1)
	secure := newADSClient(t, conn, "delta", "secure", "c", nil)
	secure.subscribe(resource.ClusterType, s1)
	l := upstreamLink(t, r, "s.example", func(l upstream.LinkStatus) bool { return l.LastError != "" })
	if !strings.Contains(l.LastError, "certificate signed by unknown authority") {
		t.Errorf("s.example without its CA: last_error %q, want the unknown authority named", l.LastError)
	}
	plainStreams, _ := oPlain.streams()

	replaceFile(t, path, withTLS(files.ca))
	postReload(t, r)
	secure.waitTimeout(s1, 1) // answered through the stream it had
	oPlain.set(resource.ClusterType, p1, cluster(p1, 2))
	plain.waitTimeout(p1, 2)
	if now, _ := oPlain.streams(); now != plainStreams {
		t.Errorf("the other authority's origin saw %d new streams, want 0", now-plainStreams)
	}
}
