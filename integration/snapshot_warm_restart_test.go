package integration

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// Warm restart (cache.snapshot_path): a relay that restarts serves what it
// cached before, from the snapshot, at once, whether its origin is up or
// down; with the origin up, the origin is asked with every cached version
// and sends only what changed while the relay was down.

const warmResources = 20 // endpoints; plus warmClusters clusters

const warmClusters = 5

// warmSetup is an origin holding the test's resources and a snapshot path.
type warmSetup struct {
	o         *gcpOrigin
	path      string
	endpoints []string
	clusters  []string
	revs      map[string]uint32
}

func newWarmSetup(t *testing.T) *warmSetup {
	t.Helper()
	w := &warmSetup{o: newGCPOrigin(t), path: filepath.Join(t.TempDir(), "relay.snap")}
	w.endpoints = endpointNames("warm", warmResources)
	w.revs = revisions(w.endpoints, 1)
	w.o.setAll(resource.EndpointType, clas(w.revs))
	for i := range warmClusters {
		c := dsCluster("warm-" + string(rune('a'+i)))
		w.clusters = append(w.clusters, c)
		w.o.set(resource.ClusterType, c, cluster(c, 1))
	}
	return w
}

// relay starts a relay in front of the origin; with snapshot, it keeps
// its snapshot at w.path. edit, when set, edits the config further.
func (w *warmSetup) relay(t *testing.T, snapshot bool, edit func(*config.Config)) *relayproc.Relay {
	t.Helper()
	return startRelay(t, func(cfg *config.Config) {
		cfg.Log.Level = config.LogInfo
		if snapshot {
			cfg.Cache.SnapshotPath = w.path
		}
		if edit != nil {
			edit(cfg)
		}
	}, w.o.addr)
}

// client opens a delta client on r, subscribed to every endpoint and
// cluster.
func (w *warmSetup) client(t *testing.T, r *relayproc.Relay, name string) *adsClient {
	t.Helper()
	c := newADSClient(t, dial(t, r.XDSAddr()), "delta", name, "", nil)
	c.subscribe(resource.EndpointType, w.endpoints...)
	c.subscribe(resource.ClusterType, w.clusters...)
	return c
}

// firstRun serves one client through a relay and closes the relay: what
// the client held, by type.
func (w *warmSetup) firstRun(t *testing.T, snapshot bool) map[string]map[string]string {
	t.Helper()
	a := w.relay(t, snapshot, nil)
	c := w.client(t, a, "before")
	c.waitHolds(resource.EndpointType, w.endpoints...)
	c.waitHolds(resource.ClusterType, w.clusters...)
	held := map[string]map[string]string{
		resource.EndpointType: c.versions(resource.EndpointType),
		resource.ClusterType:  c.versions(resource.ClusterType),
	}
	if err := a.Close(); err != nil {
		t.Fatalf("relay A close: %v", err)
	}
	_, err := os.Stat(w.path)
	if snapshot && err != nil {
		t.Fatalf("after Close, no snapshot at cache.snapshot_path: %v", err)
	}
	if !snapshot && err == nil {
		t.Fatal("a snapshot written without cache.snapshot_path")
	}
	if snapshot {
		if n := relayMetric(t, a, "xds_relay_cache_snapshot_writes_total", "result", "ok"); n < 1 {
			t.Errorf("relay A: snapshot_writes_total{result=ok} = %v, want at least 1", n)
		}
	}
	return held
}

// readyz returns the relay's /readyz status and body.
func readyz(t *testing.T, r *relayproc.Relay) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.AdminAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz re-reads /readyz (it has no event to wait on) until it
// answers want.
func waitReadyz(t *testing.T, r *relayproc.Relay, what string, want int) {
	t.Helper()
	xdstest.Poll(t, what, func() error {
		if code, body := readyz(t, r); code != want {
			return fmt.Errorf("/readyz %d %q, want %d", code, body, want)
		}
		return nil
	})
}

// originCounts is what the origin was asked and sent on delta streams,
// from the request and response indexes given on.
type originCounts struct {
	streams          int
	requests         int
	initialVersions  map[string]int // by type: names in initial_resource_versions
	subscribed       map[string]int // by type
	unsubscribed     int
	resourcesSent    map[string]int // by type
	sentNames        []string
	responseTimeouts float64
}

func (o *gcpOrigin) countsSince(opens, reqs, resps int) originCounts {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := originCounts{streams: o.deltaOpens - opens, initialVersions: map[string]int{}, subscribed: map[string]int{}, resourcesSent: map[string]int{}}
	for _, q := range o.deltaReqs[reqs:] {
		c.requests++
		c.initialVersions[q.GetTypeUrl()] += len(q.GetInitialResourceVersions())
		c.subscribed[q.GetTypeUrl()] += len(q.GetResourceNamesSubscribe())
		c.unsubscribed += len(q.GetResourceNamesUnsubscribe())
	}
	for _, r := range o.deltaResps[resps:] {
		c.resourcesSent[r.GetTypeUrl()] += len(r.GetResources())
		for _, x := range r.GetResources() {
			c.sentNames = append(c.sentNames, x.GetName())
		}
	}
	return c
}

func (o *gcpOrigin) marks() (opens, reqs, resps int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deltaOpens, len(o.deltaReqs), len(o.deltaResps)
}

// TestWarmRestart: a relay restarts with and without a snapshot, its
// origin down or up (one endpoint changed while no relay ran). A client
// that held every resource reconnects as a fresh client (no
// initial_resource_versions) and the test reports what it holds, and what
// the origin was asked and sent.
func TestWarmRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snapshot  bool
		originUp  bool
		change    bool // one endpoint changes while no relay runs (origin up)
		wantHeld  int  // resources the client holds after reconnecting
		wantReady int
	}{
		{name: "snapshot/origin-down", snapshot: true, wantHeld: warmResources + warmClusters, wantReady: http.StatusOK},
		{name: "snapshot/origin-up", snapshot: true, originUp: true, change: true, wantHeld: warmResources + warmClusters, wantReady: http.StatusOK},
		{name: "snapshot/origin-up-unchanged", snapshot: true, originUp: true, wantHeld: warmResources + warmClusters, wantReady: http.StatusOK},
		{name: "no-snapshot/origin-down", wantHeld: 0, wantReady: http.StatusServiceUnavailable},
		{name: "no-snapshot/origin-up", originUp: true, change: true, wantHeld: warmResources + warmClusters, wantReady: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWarmSetup(t)
			held := w.firstRun(t, tc.snapshot)
			changed := w.endpoints[3]
			// The origin restarts (no stream of relay A lingers in it), with
			// one endpoint changed, or stays down.
			w.o.stop()
			if tc.change {
				w.o.set(resource.EndpointType, changed, cla(changed, 2))
			}
			if tc.originUp {
				w.o.restart()
			}
			opens, reqs, resps := w.o.marks()

			start := time.Now()
			b := w.relay(t, tc.snapshot, func(cfg *config.Config) {
				if tc.originUp && !tc.change {
					// Short, so that the probe below comes soon: an origin
					// with nothing to send must not be taken for a
					// stalled one.
					cfg.Upstream.ResponseTimeout = 100 * time.Millisecond
				}
			})
			if tc.snapshot {
				if n := relayMetric(t, b, "xds_relay_cache_snapshot_loads_total", "result", "loaded"); n != 1 {
					t.Errorf("snapshot_loads_total{result=loaded} = %v, want 1", n)
				}
				if n := relayMetric(t, b, "xds_relay_cache_snapshot_restored_resources"); n != warmResources+warmClusters {
					t.Errorf("snapshot_restored_resources = %v, want %d", n, warmResources+warmClusters)
				}
				if a := relayMetric(t, b, "xds_relay_cache_snapshot_age_seconds"); a < 0 || a > xdstest.WaitTimeout.Seconds() {
					t.Errorf("snapshot_age_seconds = %v, want the age of A's final write", a)
				}
			}
			c := w.client(t, b, "after")
			if tc.wantHeld > 0 {
				c.waitHolds(resource.EndpointType, w.endpoints...)
				c.waitHolds(resource.ClusterType, w.clusters...)
			}
			whole := time.Since(start)
			if tc.snapshot && tc.change {
				// The change arrives after the snapshot's state.
				for claRev(c.held[resource.EndpointType][changed]) != 2 {
					if _, ok := c.recvOne(timeoutChan(t)); !ok {
						t.Fatalf("%s never reached the client", changed)
					}
				}
			}
			if tc.originUp && !tc.change {
				// The origin has nothing to send until the relay probes
				// its silence (after upstream.response_timeout): wait for
				// the probe's answer, then the quiet period below shows
				// it reached no client.
				w.o.waitFor("the liveness probe answered", func() bool { return len(w.o.deltaResps) > resps })
			}
			if !tc.originUp && !tc.snapshot {
				// Nothing to serve, no origin: each type's names are told
				// UNAVAILABLE (resource_errors), in one response per type.
				for _, typeURL := range []string{resource.EndpointType, resource.ClusterType} {
					r, ok := c.recvOne(timeoutChan(t))
					if !ok || len(r.resources) != 0 {
						t.Fatalf("want a response of resource errors only for %s, got %+v (%v)", typeURL, r, ok)
					}
				}
			}
			c.quiet()
			waitReadyz(t, b, "after reconnecting", tc.wantReady)

			// What the client holds: every resource, at the versions it
			// held before (the changed one at its new version).
			n := len(c.held[resource.EndpointType]) + len(c.held[resource.ClusterType])
			if n != tc.wantHeld {
				t.Errorf("client holds %d resources, want %d", n, tc.wantHeld)
			}
			if tc.wantHeld > 0 {
				want := maps.Clone(held[resource.EndpointType])
				got := c.versions(resource.EndpointType)
				if tc.change {
					delete(want, changed)
					delete(got, changed)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("endpoint versions after restart (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(held[resource.ClusterType], c.versions(resource.ClusterType)); diff != "" {
					t.Errorf("cluster versions after restart (-before +after):\n%s", diff)
				}
			}

			oc := w.o.countsSince(opens, reqs, resps)
			timeouts := relayMetric(t, b, "xds_relay_upstream_response_timeouts_total", "authority", dsAuthority)
			t.Logf("%s: client holds %d resources (after %v); origin: %d streams, %d requests, initial_resource_versions %d endpoints + %d clusters (%d unsubscribes: probes), resources sent %d endpoints + %d clusters; response timeouts %v",
				tc.name, n, whole.Round(time.Millisecond), oc.streams, oc.requests, oc.initialVersions[resource.EndpointType], oc.initialVersions[resource.ClusterType],
				oc.unsubscribed, oc.resourcesSent[resource.EndpointType], oc.resourcesSent[resource.ClusterType], timeouts)
			if !tc.originUp {
				return
			}
			if oc.streams != 1 {
				t.Errorf("origin saw %d streams, want 1", oc.streams)
			}
			if timeouts != 0 {
				t.Errorf("response_timeouts_total = %v: an origin with nothing to send was taken for a stalled one", timeouts)
			}
			if !tc.snapshot {
				if oc.initialVersions[resource.EndpointType]+oc.initialVersions[resource.ClusterType] != 0 || oc.resourcesSent[resource.EndpointType] != warmResources {
					t.Errorf("without a snapshot: %+v, want no initial versions and every endpoint sent", oc)
				}
				return
			}
			if oc.initialVersions[resource.EndpointType] != warmResources || oc.initialVersions[resource.ClusterType] != warmClusters {
				t.Errorf("initial_resource_versions: %v, want every cached name (%d endpoints, %d clusters)", oc.initialVersions, warmResources, warmClusters)
			}
			if tc.change {
				if diff := cmp.Diff([]string{changed}, oc.sentNames); diff != "" {
					t.Errorf("origin sent (-want only the change +got):\n%s", diff)
				}
				return
			}
			// Unchanged: the origin rightly said nothing, until the relay
			// probed its silence (after upstream.response_timeout) with
			// one resource, which comes back identical: no client is told.
			if len(oc.sentNames) != 1 {
				t.Errorf("origin sent %v, want the one resource of the liveness probe", oc.sentNames)
			}
		})
	}
}

// timeoutChan is closed after xdstest.WaitTimeout.
func timeoutChan(t *testing.T) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(xdstest.WaitTimeout, func() { close(done) })
	t.Cleanup(func() { timer.Stop() })
	return done
}

// TestWarmRestartResumingClient: a client that reconnects with what it
// held (initial_resource_versions), to a relay restarted from its snapshot
// while the origin changed one resource and deleted another, receives
// exactly that change and that removal.
func TestWarmRestartResumingClient(t *testing.T) {
	w := newWarmSetup(t)
	held := w.firstRun(t, true)
	changed, gone := w.endpoints[7], w.endpoints[11]
	w.o.stop()
	w.o.set(resource.EndpointType, changed, cla(changed, 2))
	w.o.del(resource.EndpointType, gone)
	w.o.restart()
	_, reqs, resps := w.o.marks()

	b := w.relay(t, true, nil)
	c := newADSClient(t, dial(t, b.XDSAddr()), "delta", "resumed", "", nil)
	c.resume(resource.EndpointType, held[resource.EndpointType], w.endpoints...)
	c.resume(resource.ClusterType, held[resource.ClusterType], w.clusters...)
	var names, removed []string
	responses := 0
	done := timeoutChan(t)
	for claRev(c.held[resource.EndpointType][changed]) != 2 || c.held[resource.EndpointType][gone] != nil {
		got, ok := c.recvOne(done)
		if !ok {
			t.Fatalf("the change and the removal never reached the client; received %v, removed %v", names, removed)
		}
		responses++
		for _, x := range got.resources {
			names = append(names, x.GetName())
		}
		removed = append(removed, got.removed...)
	}
	c.quiet()
	if !slices.Equal(names, []string{changed}) || !slices.Equal(removed, []string{gone}) {
		t.Errorf("client received %v and removals %v, want only %s and the removal of %s", names, removed, changed, gone)
	}
	oc := w.o.countsSince(0, reqs, resps)
	t.Logf("resumed client: %d responses, resources %v, removed %v; origin sent %v", responses, names, removed, oc.sentNames)
}

// TestWarmRestartBadSnapshot: a snapshot that is corrupt, truncated, or
// was written under another config is ignored: the relay starts empty,
// says why in xds_relay_cache_snapshot_loads_total, serves from the
// origin, and leaves a good snapshot at the path when it closes.
func TestWarmRestartBadSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spoil  func(t *testing.T, path string)
		edit   func(*config.Config)
		result string
	}{
		{name: "corrupt", result: "corrupt", spoil: func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			writeSnapshotBytes(t, path, b)
		}},
		{name: "truncated", result: "corrupt", spoil: func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeSnapshotBytes(t, path, b[:len(b)-40])
		}},
		{name: "not a snapshot", result: "corrupt", spoil: func(t *testing.T, path string) {
			writeSnapshotBytes(t, path, bytes.Repeat([]byte("garbage\n"), 100))
		}},
		{name: "another config", result: "foreign_config", edit: func(cfg *config.Config) { cfg.Node.ID = "another-relay" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWarmSetup(t)
			w.firstRun(t, true)
			if tc.spoil != nil {
				tc.spoil(t, w.path)
			}
			b := w.relay(t, true, tc.edit)
			if n := relayMetric(t, b, "xds_relay_cache_snapshot_loads_total", "result", tc.result); n != 1 {
				t.Errorf("snapshot_loads_total{result=%s} = %v, want 1", tc.result, n)
			}
			if n := relayMetric(t, b, "xds_relay_cache_resources"); n != 0 {
				t.Errorf("cache holds %v resources after an ignored snapshot, want 0", n)
			}
			c := w.client(t, b, "after")
			c.waitHolds(resource.EndpointType, w.endpoints...)
			c.waitHolds(resource.ClusterType, w.clusters...)
			waitReadyz(t, b, "served from the origin", http.StatusOK)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}

			// The bad file was replaced: a third relay with B's config loads it.
			w.o.stop()
			c3 := w.relay(t, true, tc.edit)
			if n := relayMetric(t, c3, "xds_relay_cache_snapshot_loads_total", "result", "loaded"); n != 1 {
				t.Errorf("after B closed: snapshot_loads_total{result=loaded} = %v, want 1", n)
			}
			if n := relayMetric(t, c3, "xds_relay_cache_snapshot_restored_resources"); n != warmResources+warmClusters {
				t.Errorf("after B closed: restored %v resources, want %d", n, warmResources+warmClusters)
			}
		})
	}
}

// TestWarmRestartPeriodicWrite: the snapshot is written while the relay
// runs (not only at Close), after a change, within snapshot_interval.
func TestWarmRestartPeriodicWrite(t *testing.T) {
	w := newWarmSetup(t)
	a := w.relay(t, true, func(cfg *config.Config) { cfg.Cache.SnapshotInterval = 50 * time.Millisecond })
	c := w.client(t, a, "c")
	c.waitHolds(resource.EndpointType, w.endpoints...)
	c.waitHolds(resource.ClusterType, w.clusters...)
	waitRelayMetric(t, a, "a snapshot written while serving", func(v float64) bool { return v >= warmResources+warmClusters },
		"xds_relay_cache_snapshot_resources")
	writes := relayMetric(t, a, "xds_relay_cache_snapshot_writes_total", "result", "ok")
	// Nothing changes: nothing is rewritten.
	c.quiet()
	if n := relayMetric(t, a, "xds_relay_cache_snapshot_writes_total", "result", "ok"); n != writes {
		t.Errorf("snapshot rewritten %v times with nothing changed", n-writes)
	}
	w.o.set(resource.EndpointType, w.endpoints[0], cla(w.endpoints[0], 9))
	waitRelayMetric(t, a, "a rewrite after a change", func(v float64) bool { return v > writes },
		"xds_relay_cache_snapshot_writes_total", "result", "ok")
	ents, err := os.ReadDir(filepath.Dir(w.path))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{filepath.Base(w.path)}) {
		t.Errorf("snapshot directory holds %v, want only %s (no temporary file left)", names, filepath.Base(w.path))
	}
	if code, body := readyz(t, a); code != http.StatusOK || !strings.Contains(body, "ready") {
		t.Errorf("/readyz %d %q", code, body)
	}
}

func writeSnapshotBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWarmRestartGlob: a glob collection the origin had answered is
// restored whole: delta and SotW clients of the glob get every member at
// once from a relay restarted from its snapshot while the origin is down.
func TestWarmRestartGlob(t *testing.T) {
	w := newWarmSetup(t)
	glob := dsEndpoints("*")
	a := w.relay(t, true, nil)
	before := newADSClient(t, dial(t, a.XDSAddr()), "delta", "before", "", nil)
	before.subscribe(resource.EndpointType, glob)
	before.waitHolds(resource.EndpointType, w.endpoints...)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	w.o.stop()

	b := w.relay(t, true, nil)
	for _, variant := range []string{"delta", "sotw"} {
		c := newADSClient(t, dial(t, b.XDSAddr()), variant, variant+"-after", "", nil)
		c.subscribe(resource.EndpointType, glob)
		c.waitHolds(resource.EndpointType, w.endpoints...)
		if diff := cmp.Diff(before.versions(resource.EndpointType), c.versions(resource.EndpointType)); variant == "delta" && diff != "" {
			t.Errorf("%s: versions after restart (-before +after):\n%s", variant, diff)
		}
	}
	waitReadyz(t, b, "glob served from the snapshot", http.StatusOK)
}

// TestWarmRestartAfterReload: a reload that moves an authority to another
// origin changes what the snapshot is written under, so a relay started
// from the reloaded file loads it (and serves it with both origins down)
// instead of calling it another config's.
func TestWarmRestartAfterReload(t *testing.T) {
	a1 := xdstpName("a.example", "envoy.config.cluster.v3.Cluster", "a1")
	o1, o2 := newGCPOrigin(t), newGCPOrigin(t)
	o1.set(resource.ClusterType, a1, cluster(a1, 1))
	o2.set(resource.ClusterType, a1, cluster(a1, 1))
	dir := t.TempDir()
	path, snap := filepath.Join(dir, "relay.yaml"), filepath.Join(dir, "relay.snap")
	extra := "cache: {snapshot_path: " + strconv.Quote(snap) + "}\n"
	replaceFile(t, path, reloadConfig([][2]string{{"a.example", o1.addr}}, extra))
	a, _ := fileRelay(t, path)
	c := newADSClient(t, dial(t, a.XDSAddr()), "delta", "before", "", nil)
	c.subscribe(resource.ClusterType, a1)
	c.waitHolds(resource.ClusterType, a1)

	replaceFile(t, path, reloadConfig([][2]string{{"a.example", o2.addr}}, extra))
	if err := a.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	o1.stop()
	o2.stop()

	b, reg := fileRelay(t, path)
	if n := gathered(t, reg, "xds_relay_cache_snapshot_loads_total", "result", "loaded"); n != 1 {
		t.Errorf("snapshot_loads_total{result=loaded} = %v after a reload, want 1 (foreign_config: %v)", n,
			gathered(t, reg, "xds_relay_cache_snapshot_loads_total", "result", "foreign_config"))
	}
	after := newADSClient(t, dial(t, b.XDSAddr()), "delta", "after", "", nil)
	after.subscribe(resource.ClusterType, a1)
	after.waitHolds(resource.ClusterType, a1)
}
