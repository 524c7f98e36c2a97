package integration

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/upstream"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Honest diagnostics (issue 18): what the relay says about an origin rests
// on evidence about the origin itself.

// TestUnknownNamesAreNotAStall: a client asks only for a name the origin
// does not have, and the origin (go-control-plane) says nothing about it,
// as an origin may. The origin answers a liveness probe, so the link stays
// on it: open, no error, no failover, /readyz 200; and when the name
// appears at the origin, the client gets it on the same stream. Before,
// the relay read the silence as a stalled origin: "origin did not answer",
// failover, /readyz 503, and the link never settled.
func TestUnknownNamesAreNotAStall(t *testing.T) {
	present, missing := dsCluster("present"), dsCluster("missing")
	for _, tc := range []struct {
		transport string
		// origin: one silent about names it does not have (go-control-plane's
		// delta server, its ADS SnapshotCache over SotW); add, when set: the
		// name appears at the origin and reaches the client.
		origin func(t *testing.T) (o *gcpOrigin, add func())
	}{
		{xdstype.TransportDelta, func(t *testing.T) (*gcpOrigin, func()) {
			o := newGCPOrigin(t)
			o.set(resource.ClusterType, present, cluster(present, 1))
			return o, func() { o.set(resource.ClusterType, missing, cluster(missing, 2)) }
		}},
		{xdstype.TransportSotW, func(t *testing.T) (*gcpOrigin, func()) {
			o := newSnapshotOrigin(t)
			o.setSnapshot("1", map[resource.Type][]types.Resource{resource.ClusterType: {cluster(present, 1)}})
			// Not added later: this origin does not send a name added to
			// its snapshot to a SotW stream already waiting for it, with
			// or without the probe (seen while writing this test).
			return o, nil
		}},
	} {
		transport := tc.transport
		t.Run(transport, func(t *testing.T) {
			o, add := tc.origin(t)
			r := startRelay(t, func(cfg *config.Config) {
				cfg.Log.Level = config.LogInfo
				cfg.Authorities[0].Transport = transport
				// Long enough for a loaded machine's origin to answer the
				// probe: the test waits for the answer, not for the timeout.
				cfg.Upstream.ResponseTimeout = 2 * time.Second
			}, o.addr)
			d := openDelta(t, dial(t, r.XDSAddr()))
			d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{missing}})

			l := upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return l.State == "open" })
			if l.Origin != o.addr || l.LastError != "" || l.LastErrorAt != nil {
				t.Errorf("/debug/upstreams link: %+v, want open on %s with no error", l, o.addr)
			}
			for _, m := range []string{"xds_relay_upstream_response_timeouts_total", "xds_relay_upstream_reconnects_total"} {
				if n := relayMetric(t, r, m, "authority", dsAuthority); n != 0 {
					t.Errorf("%s = %v, want 0: the origin is alive", m, n)
				}
			}
			if code, body := readyz(t, r); code != http.StatusOK {
				t.Errorf("/readyz: %d %q, want 200: the origin answers", code, body)
			}

			if add != nil {
				add()
				v := deltaView{}
				recvDelta(t, d, v, has(v, missing))
			}
			delta, sotw := o.streams()
			if delta+sotw != 2 {
				t.Errorf("origin saw %d delta and %d SotW streams, want 2 in all: the link's and one liveness probe's", delta, sotw)
			}
		})
	}
}

// TestErrorsCarryTimeAndClear: while the origin is down, /debug/upstreams
// and the status page (/debug/status, and the HTML page) show the link's
// error with the time it happened; once the origin answers again the error
// is gone from all three. Before, the error had no time and stayed, in red,
// after recovery.
func TestErrorsCarryTimeAndClear(t *testing.T) {
	o := newGCPOrigin(t)
	c := dsCluster("flaps")
	o.set(resource.ClusterType, c, cluster(c, 1))
	o.stop()
	start := time.Now()
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
	d := openDelta(t, dial(t, r.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c}})

	l := upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return l.LastError != "" })
	if l.LastErrorAt == nil || l.LastErrorAt.Before(start.Add(-time.Second)) || l.LastErrorAt.After(time.Now()) {
		t.Errorf("/debug/upstreams: last_error_at %v, want the time of %q", l.LastErrorAt, l.LastError)
	}
	st := fetchStatus(t, "http://"+r.AdminAddr())
	if len(st.Authorities) != 1 || st.Authorities[0].LastError == "" || st.Authorities[0].LastErrorAt == nil {
		t.Errorf("/debug/status authorities: %+v, want the error with its time", st.Authorities)
	}
	page := statusPage(t, r)
	if at := st.Authorities[0].LastErrorAt; at != nil && !strings.Contains(page, at.UTC().Format("15:04:05")+" UTC: ") {
		t.Errorf("status page does not show the error's time %v:\n%s", at, page)
	}

	o.restart()
	v := deltaView{}
	recvDelta(t, d, v, has(v, c))
	l = upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool { return l.State == "open" })
	if l.LastError != "" || l.LastErrorAt != nil {
		t.Errorf("/debug/upstreams after recovery: %+v, want no error", l)
	}
	st = fetchStatus(t, "http://"+r.AdminAddr())
	if a := st.Authorities[0]; a.LastError != "" || a.LastErrorAt != nil {
		t.Errorf("/debug/status after recovery: %+v, want no error", a)
	}
	if page := statusPage(t, r); strings.Contains(page, "connection refused") {
		t.Errorf("status page still shows the old error after recovery:\n%s", page)
	}
}

// statusPage reads the HTML status page (/).
func statusPage(t *testing.T, r *relayproc.Relay) string {
	t.Helper()
	resp, err := http.Get("http://" + r.AdminAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOriginChecksAtStart: a misspelt origin (its name does not resolve)
// and an unreachable one (nothing listens) are reported at start, before
// any client, in words: /debug/upstreams (an "unused" row for the
// authority, with its origins), the status page and
// xds_relay_upstream_origin_check_failures_total; start is not held up
// (/readyz 200). A link on the misspelt origin then says why it fails in
// the same words, not gRPC's "produced zero addresses". Before, the relay
// said nothing until the first client.
func TestOriginChecksAtStart(t *testing.T) {
	o := newGCPOrigin(t)
	const misspelt = "no-such-origin.invalid:18000"
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := lis.Addr().String()
	lis.Close() // nothing listens there now
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, misspelt, refused, o.addr)

	l := upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool {
		return len(l.Origins) == 3 && !slices.ContainsFunc(l.Origins, func(c upstream.OriginCheck) bool { return c.State == "checking" })
	})
	if l.State != "unused" {
		t.Errorf("/debug/upstreams row before any client: state %q, want unused", l.State)
	}
	wantErr := []string{"resolve no-such-origin.invalid: ", "connect " + refused + ": connection refused", ""}
	for i, c := range l.Origins {
		if c.At == nil || !strings.HasPrefix(c.Error, wantErr[i]) || (wantErr[i] == "") != (c.State == "ok") {
			t.Errorf("origin check %d: %+v, want an error starting %q", i, c, wantErr[i])
		}
	}
	if n := relayMetric(t, r, "xds_relay_upstream_origin_check_failures_total", "authority", dsAuthority); n != 2 {
		t.Errorf("origin_check_failures_total = %v, want 2", n)
	}
	if code, body := readyz(t, r); code != http.StatusOK {
		t.Errorf("/readyz: %d %q, want 200: checks do not hold start up", code, body)
	}
	st := fetchStatus(t, "http://"+r.AdminAddr())
	if len(st.Authorities) != 1 || len(st.Authorities[0].OriginChecks) != 3 || st.Authorities[0].OriginChecks[0].State != "failed" {
		t.Errorf("/debug/status authorities: %+v, want the origin checks", st.Authorities)
	}
	if page := statusPage(t, r); !strings.Contains(page, "origin "+misspelt+": resolve no-such-origin.invalid") {
		t.Errorf("status page does not show the misspelt origin:\n%s", page)
	}

	// A link on the misspelt origin alone says why it fails.
	r2 := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, misspelt)
	d := openDelta(t, dial(t, r2.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNodeDS, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{dsCluster("x")}})
	l = upstreamLink(t, r2, dsAuthority, func(l upstream.LinkStatus) bool { return l.LastError != "" })
	if !strings.Contains(l.LastError, "resolve no-such-origin.invalid: ") {
		t.Errorf("link on a misspelt origin: last_error %q, want it to say the name does not resolve", l.LastError)
	}
}

// TestFileSourceErrorsShown: a file of a file:// origin that does not
// parse is shown in /debug/upstreams (the origin's file_problems) and on
// the status page with its file and its YAML line, and the entry goes
// once the file is mended. Before, it was only in the log, with a position
// in the JSON the relay made of the YAML.
func TestFileSourceErrorsShown(t *testing.T) {
	dir := t.TempDir()
	good := dsCluster("good")
	writeFile(t, dir, "good.yaml", clusterYAML(strconv.Quote(good), "1s"))
	bad := "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n" +
		"name: " + strconv.Quote(dsCluster("bad")) + "\n" +
		"connect_timeout: 1s\n" +
		"no_such_field: 3\n"
	writeFile(t, dir, "bad.yaml", bad)
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, upstream.FileOriginPrefix+dir)
	d := openDelta(t, dial(t, r.XDSAddr()))
	subscribeClusters(t, d, good) // the file source runs once a link uses it

	l := upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool {
		return len(l.Origins) == 1 && len(l.Origins[0].FileProblems) > 0
	})
	p := l.Origins[0].FileProblems[0]
	if p.File != filepath.Join(dir, "bad.yaml") || !strings.HasPrefix(p.Error, `line 4: `) || !strings.Contains(p.Error, "no_such_field") {
		t.Errorf("/debug/upstreams file problem: %+v, want bad.yaml, line 4, no_such_field", p)
	}
	if page := statusPage(t, r); !strings.Contains(page, "bad.yaml: line 4: ") {
		t.Errorf("status page does not show bad.yaml's line:\n%s", page)
	}

	writeFile(t, dir, "bad.yaml", strings.Replace(bad, "no_such_field: 3\n", "", 1))
	upstreamLink(t, r, dsAuthority, func(l upstream.LinkStatus) bool {
		return len(l.Origins) == 1 && len(l.Origins[0].FileProblems) == 0
	})
}

// restPoll posts a REST-JSON poll for clusters names to r.
func restPoll(t *testing.T, r *relayproc.Relay, names ...string) (int, string) {
	t.Helper()
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	body := `{"node": {"id": "rest-node", "cluster": "rest"}, "resource_names": [` + strings.Join(q, ",") + `]}`
	resp, err := http.Post("http://"+r.RESTAddr()+"/v3/discovery:clusters", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRESTSaysWhy: a REST poll that finds nothing tells "origin down"
// (503 with the authority's state, after downstream.fetch_wait) from
// "does not exist" (404, at once, for names the origin said do not
// exist); a name that exists is 200. Before, both were 200 with an empty
// list after a fixed, undocumented 5 s.
func TestRESTSaysWhy(t *testing.T) {
	rest := func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		cfg.RESTListen = "127.0.0.1:0"
		cfg.Downstream.FetchWait = 300 * time.Millisecond
	}
	t.Run("origin down", func(t *testing.T) {
		o := newGCPOrigin(t)
		o.stop()
		r := startRelay(t, rest, o.addr)
		code, body := restPoll(t, r, dsCluster("x"))
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream "+dsAuthority+": no origin has answered") {
			t.Errorf("REST poll with the origin down: %d %q, want 503 naming the authority's state", code, body)
		}
	})
	// A healthy origin that does not have a name says nothing of it
	// (go-control-plane's delta server); the relay does not blame it: the
	// poll is answered with what is known (200, nothing), as gRPC clients
	// are told nothing either. Asked first, before the origin answered
	// anything, with upstream.response_timeout still running.
	t.Run("healthy origin without the name", func(t *testing.T) {
		o := newGCPOrigin(t)
		present := dsCluster("present")
		o.set(resource.ClusterType, present, cluster(present, 1))
		r := startRelay(t, rest, o.addr)
		code, body := restPoll(t, r, dsCluster("missing"))
		if code != http.StatusOK || strings.Contains(body, "no origin") || strings.Contains(body, `"resources"`) {
			t.Errorf("REST poll for a name the origin does not have: %d %q, want 200 with no resources", code, body)
		}
		if code, body := restPoll(t, r, present); code != http.StatusOK || !strings.Contains(body, present) {
			t.Errorf("REST poll for %s: %d %q, want 200 with it", present, code, body)
		}
	})
	t.Run("does not exist", func(t *testing.T) {
		dir := t.TempDir()
		present := dsCluster("present")
		writeFile(t, dir, "c.yaml", clusterYAML(strconv.Quote(present), "1s"))
		r := startRelay(t, rest, upstream.FileOriginPrefix+dir)
		if code, body := restPoll(t, r, present); code != http.StatusOK || !strings.Contains(body, present) {
			t.Errorf("REST poll for %s: %d %q, want 200 with it", present, code, body)
		}
		missing := dsCluster("missing")
		if code, body := restPoll(t, r, missing); code != http.StatusNotFound || !strings.Contains(body, "does not exist") {
			t.Errorf("REST poll for %s: %d %q, want 404", missing, code, body)
		}
	})
}
