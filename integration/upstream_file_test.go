package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// writeFile writes atomically (temp file, then rename) so the file source
// never sees a half-written file.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func clusterYAML(name, timeout string) string {
	return "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: " + name + "\nconnect_timeout: " + timeout + "\n"
}

// TestUpstreamFileSource: a directory of resource files is an origin;
// create, edit and delete flow to watchers, and a malformed file is
// counted and skipped while its last good version stays.
func TestUpstreamFileSource(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c1.yaml", clusterYAML("c1", "1s"))
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{upstream.FileOriginPrefix + dir}})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"), cdsKey("c2"), cdsKey("c3"), cdsKey("missing"))

	got := w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	if diff := cmp.Diff(mustAny(t, cluster("c1", 1)), got.Body, protocmp.Transform()); diff != "" {
		t.Errorf("c1 (-want +got):\n%s", diff)
	}
	w.waitState(t, r.c, cdsKey("missing"), cache.StateAbsent)

	t.Run("create", func(t *testing.T) {
		writeFile(t, dir, "c2.json", `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c2"}`)
		w.waitState(t, r.c, cdsKey("c2"), cache.StatePresent)
	})
	t.Run("edit", func(t *testing.T) {
		v1 := r.c.Lookup(nil, cdsKey("c1")).Res
		writeFile(t, dir, "c1.yaml", clusterYAML("c1", "2s"))
		w.waitFor(t, "c1 edited", func() bool {
			got := r.c.Lookup(nil, cdsKey("c1")).Res
			return got != nil && cmp.Diff(mustAny(t, cluster("c1", 2)), got.Body, protocmp.Transform()) == ""
		})
		v2 := r.c.Lookup(nil, cdsKey("c1")).Res
		if v1.Version == v2.Version {
			t.Errorf("edit kept version %q", v1.Version)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		writeFile(t, dir, "bad.yaml", "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: [\n")
		writeFile(t, dir, "c1.yaml", "not: a: resource: {{{")
		// c3 arriving proves a scan after both bad writes finished.
		writeFile(t, dir, "c3.yaml", clusterYAML("c3", "3s"))
		w.waitState(t, r.c, cdsKey("c3"), cache.StatePresent)
		read := r.c.Lookup(nil, cdsKey("c1"))
		got, st := read.Res, read.State
		if st != cache.StatePresent {
			t.Fatalf("c1 after a malformed edit: %v, want its last good version", st)
		}
		if diff := cmp.Diff(mustAny(t, cluster("c1", 2)), got.Body, protocmp.Transform()); diff != "" {
			t.Errorf("c1 after a malformed edit (-want +got):\n%s", diff)
		}
		if got := metricValue(t, r, "xds_relay_file_source_errors_total", "authority", "origin"); got != 2 {
			t.Errorf("file_source_errors_total = %v, want 2 (bad.yaml, c1.yaml)", got)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := os.Remove(filepath.Join(dir, "c2.json")); err != nil {
			t.Fatal(err)
		}
		w.waitState(t, r.c, cdsKey("c2"), cache.StateAbsent)
		if st := r.c.Lookup(nil, cdsKey("c3")).State; st != cache.StatePresent {
			t.Errorf("c3 after deleting c2: %v", st)
		}
	})
}
