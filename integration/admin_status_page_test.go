package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/net/html"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// chromiumTimeout bounds one headless Chromium run (start, load, 5 s of
// virtual time, dump); it is killed, with its child processes, after it.
const chromiumTimeout = 90 * time.Second

// screenshotEnv, when set to a path, makes TestStatusPageInChromium also
// save a screenshot of the page there (make status-screenshot).
const screenshotEnv = "XDS_RELAY_SCREENSHOT"

// The admin status page, loaded in headless Chromium against a relay with
// a go-control-plane origin and delta and SotW clients (one of which
// NACKed), shows, once its script has fetched /debug/status and redrawn
// every section: the authority and the origin in use, the client counts
// by variant and type, the cache size and the NACK's error.
func TestStatusPageInChromium(t *testing.T) {
	chromium := findChromium(t)
	c1, c2 := dsCluster("c1"), dsCluster("c2")
	e1 := "xdstp://" + dsAuthority + "/envoy.config.endpoint.v3.ClusterLoadAssignment/e1"
	o := newGCPOrigin(t)
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	o.set(resource.ClusterType, c2, cluster(c2, 2))
	o.set(resource.EndpointType, e1, &endpointv3.ClusterLoadAssignment{ClusterName: e1})
	r := startRelay(t, nil, o.addr)
	conn := dial(t, r.XDSAddr())

	d1 := newADSClient(t, conn, "delta", "envoy-delta-1", "fleet", nil)
	d1.subscribe(resource.ClusterType, c1, c2)
	d1.waitHolds(resource.ClusterType, c1, c2)
	d2 := newADSClient(t, conn, "delta", "envoy-delta-2", "fleet", nil)
	d2.subscribe(resource.ClusterType, c1)
	d2.waitHolds(resource.ClusterType, c1)
	d2.subscribe(resource.EndpointType, e1)
	d2.waitHolds(resource.EndpointType, e1)

	// A SotW client that rejects what it gets.
	const nackText = "status-page-test: cluster c1 rejected (unknown filter)"
	s := openSotW(t, conn)
	s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "envoy-sotw-1", Cluster: "fleet"}, TypeUrl: resource.ClusterType, ResourceNames: []string{c1}})
	resp := s.Recv()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{c1}, ResponseNonce: resp.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: nackText}})
	waitRelayMetric(t, r, "the SotW client's NACK", func(v float64) bool { return v == 1 },
		"xds_relay_downstream_nacks_total", "type", "envoy.config.cluster.v3.Cluster")

	admin := "http://" + r.AdminAddr()
	// The delta clients' ACKs are applied: nothing pending in the
	// per-client table.
	settled := func(st relayadmin.Status) bool {
		if len(st.ClientStates.Rows) != 3 {
			return false
		}
		for _, row := range st.ClientStates.Rows {
			if len(row.Pending) > 0 {
				return false
			}
		}
		return true
	}
	xdstest.Poll(t, "per-client table settled", func() error {
		if st := fetchStatus(t, admin); !settled(st) {
			return fmt.Errorf("%+v", st.ClientStates)
		}
		return nil
	})
	st := fetchStatus(t, admin)
	if st.Cache.Resources != 3 {
		t.Fatalf("/debug/status: cache holds %d resources, want 3 (c1, c2, e1)", st.Cache.Resources)
	}

	doc := dumpDOM(t, chromium, admin+"/")

	// The script ran, fetched /debug/status and redrew every section.
	if live := byID(t, doc, "live"); attr(live, "class") != "live" || !strings.HasPrefix(text(live), "live, updated ") {
		t.Errorf("#live = %q (class %q): the page's script did not refresh it", text(live), attr(live, "class"))
	}
	for _, sec := range []string{"authorities", "clients", "propagation", "cache", "nacks"} {
		if got := attr(byID(t, doc, sec), "data-rendered"); got != "live" {
			t.Errorf("section %s data-rendered = %q, want live (redrawn by the script from %s)", sec, got, relayadmin.StatusPath)
		}
	}
	if got := text(byID(t, doc, "ready")); got != "ready" {
		t.Errorf("readiness shows %q", got)
	}

	// Authorities: name, configured origin, origin in use, subscriptions.
	auths := rows(byID(t, doc, "authorities-rows"))
	if len(auths) != 1 {
		t.Fatalf("authority rows %q, want 1", auths)
	}
	a := auths[0]
	if a[0] != dsAuthority || a[1] != o.addr || a[2] != o.addr || a[3] != "1 (open: 1)" || a[5] != "Cluster: 2, ClusterLoadAssignment: 1" || a[6] != "" {
		t.Errorf("authority row %q, want [%s %s %s \"1 (open: 1)\" <age> \"Cluster: 2, ClusterLoadAssignment: 1\" \"\"]", a, dsAuthority, o.addr, o.addr)
	}
	if !strings.HasSuffix(a[4], "s ago") {
		t.Errorf("last response %q, want an age", a[4])
	}

	// Clients by variant and type.
	for id, want := range map[string]string{"clients-total": "3", "clients-sotw": "1", "clients-delta": "2"} {
		if got := text(byID(t, doc, id)); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	wantTypes := [][]string{{"Cluster", "1", "2"}, {"ClusterLoadAssignment", "0", "1"}}
	if got := rows(byID(t, doc, "clients-rows")); !slices.EqualFunc(got, wantTypes, slices.Equal) {
		t.Errorf("clients by type %q, want %q", got, wantTypes)
	}

	// Resources per client stream, by type (internal/csds).
	wantStates := [][]string{
		{"envoy-delta-1", "delta", "Cluster", "Cluster: 2", "", ""},
		{"envoy-delta-2", "delta", "Cluster, ClusterLoadAssignment", "Cluster: 1, ClusterLoadAssignment: 1", "", ""},
		{"envoy-sotw-1", "sotw", "Cluster", "", "Cluster: 1", ""},
	}
	if got := rows(byID(t, doc, "client-states-rows")); !slices.EqualFunc(got, wantStates, slices.Equal) {
		t.Errorf("resources per client %q, want %q", got, wantStates)
	}
	if got := text(byID(t, doc, "client-states-count")); got != "3" {
		t.Errorf("#client-states-count = %q, want 3", got)
	}
	// Each client's name links to why it is behind.
	if a := firstElement(byID(t, doc, "client-states-rows"), "a"); a == nil || attr(a, "href") != "/debug/propagation/client?node=envoy-delta-1" {
		t.Errorf("the first client's link: %v, want /debug/propagation/client?node=envoy-delta-1", a)
	}

	// Propagation: the origin changes, live, one line each; the SotW
	// client's NACK of c1 counted in the change that brought c1.
	prop := rows(byID(t, doc, "propagation-rows"))
	var lines []string
	for _, row := range prop {
		if len(row) != 4 {
			t.Fatalf("propagation row %q, want 4 cells", row)
		}
		lines = append(lines, row[2])
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "/ 1 NACKed ("+nackText+")") }) {
		t.Errorf("propagation lines %q: none shows the NACK", lines)
	}

	// Cache size.
	if got := text(byID(t, doc, "cache-resources")); got != "3" {
		t.Errorf("cache resources %q, want 3", got)
	}
	if got, want := text(byID(t, doc, "cache-bytes")), fmt.Sprintf("%d B", st.Cache.Bytes); !strings.Contains(got, want) {
		t.Errorf("cache bytes %q, want it to show %q", got, want)
	}
	if got := text(byID(t, doc, "cache-hits")); !strings.HasSuffix(got, "misses)") {
		t.Errorf("hit ratio %q", got)
	}
	// Each figure says what it counts (a legend beside it).
	for _, r := range rows(byID(t, doc, "cache-rows")) {
		if len(r) != 3 || len(r[2]) < 20 {
			t.Errorf("cache row %q: want the figure, its value and a legend", r)
		}
	}
	if got := rows(byID(t, doc, "cache-rows")); len(got) != 5 || !strings.Contains(got[2][2], "hits") || !strings.Contains(got[2][2], "misses") {
		t.Errorf("cache rows %q: want 5, the hit ratio's legend saying what hits and misses are", got)
	}

	// The NACK and its error.
	if got := text(byID(t, doc, "nacks-total")); got != "1" {
		t.Errorf("NACKs total %q, want 1", got)
	}
	nacks := rows(byID(t, doc, "nacks-rows"))
	if len(nacks) != 1 {
		t.Fatalf("NACK rows %q, want 1", nacks)
	}
	if n := nacks[0]; n[1] != "envoy-sotw-1" || n[2] != "sotw" || n[3] != "Cluster" || n[4] != resp.GetNonce() || n[5] != nackText {
		t.Errorf("NACK row %q, want node envoy-sotw-1, sotw, Cluster, nonce %s, %q", n, resp.GetNonce(), nackText)
	}

	if path := os.Getenv(screenshotEnv); path != "" {
		screenshot(t, chromium, admin+"/", path)
	}
}

// findChromium returns Debian's chromium (scripts/test-deps.sh installs
// it), or skips the test saying how to get it.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed: the status page is tested in headless Chromium (Debian's chromium package; `make test` installs it with scripts/test-deps.sh where apt-get and root are available)")
	return ""
}

func fetchStatus(t *testing.T, admin string) relayadmin.Status {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(admin + relayadmin.StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st relayadmin.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("%s: %v", relayadmin.StatusPath, err)
	}
	return st
}

// runChromium runs headless Chromium with args (after the flags every run
// uses) and returns its stdout. It is killed, with every process it
// started, after chromiumTimeout.
func runChromium(t *testing.T, chromium string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind, if any
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium did not finish within %v; stderr:\n%s", chromiumTimeout, tail(stderr.String()))
	}
	if err != nil {
		t.Fatalf("chromium %v: %v; stderr:\n%s", args, err, tail(stderr.String()))
	}
	t.Logf("chromium %v: %v", args, time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

// dumpDOM loads url and returns the DOM as it is after the page's script
// had 5 s of virtual time.
func dumpDOM(t *testing.T, chromium, url string) *html.Node {
	t.Helper()
	out := runChromium(t, chromium, "--dump-dom", url)
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("chromium's DOM: %v", err)
	}
	return doc
}

func screenshot(t *testing.T, chromium, url, path string) {
	t.Helper()
	runChromium(t, chromium, "--screenshot="+path, "--window-size=1280,900", "--hide-scrollbars", url)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("screenshot %s not written: %v", path, err)
	}
	t.Logf("screenshot saved to %s", path)
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// byID finds the element with id, failing the test when there is none.
func byID(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	var found *html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if found != nil {
			return
		}
		if n.Type == html.ElementNode && attr(n, "id") == id {
			found = n
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	if found == nil {
		t.Fatalf("the page has no element #%s", id)
	}
	return found
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text is n's text content, trimmed.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// firstElement returns the first element named tag under n, nil if none.
func firstElement(n *html.Node, tag string) *html.Node {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == tag {
			return c
		}
		if e := firstElement(c, tag); e != nil {
			return e
		}
	}
	return nil
}

// rows returns the cell texts of each <tr> under n.
func rows(n *html.Node) [][]string {
	var out [][]string
	for tr := n.FirstChild; tr != nil; tr = tr.NextSibling {
		if tr.Type != html.ElementNode || tr.Data != "tr" {
			continue
		}
		var cells []string
		for td := tr.FirstChild; td != nil; td = td.NextSibling {
			if td.Type == html.ElementNode && (td.Data == "td" || td.Data == "th") {
				cells = append(cells, text(td))
			}
		}
		out = append(out, cells)
	}
	return out
}
