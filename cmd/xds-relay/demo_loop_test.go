package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestDemoEditLoop is the quick start's edit loop as the README tells it,
// for both of its load generators: the banner names the file each one's
// resources come from, and an edit of that file shows in the load
// generator's progress line as a new version held by every client
// (endpoints.yaml for the glob clients, plain-endpoints.yaml for the
// --names demo clients).
func TestDemoEditLoop(t *testing.T) {
	demo := startProcess(t, "demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--rest-listen", "127.0.0.1:0")
	s := demo.waitServing(t)
	for _, tc := range []struct {
		file, short string
		args        []string
	}{
		{file: "endpoints.yaml", short: "backend-a",
			args: []string{"--glob", "xdstp://demo.xds-relay.local/envoy.config.endpoint.v3.ClusterLoadAssignment/demo/*"}},
		{file: "plain-endpoints.yaml", short: "demo", args: []string{"--type", "eds", "--names", "demo"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := bannerPath(t, demo, tc.file)
			lg := startProcess(t, append([]string{"loadgen", "--target", s.Listen, "--clients", "5"}, tc.args...)...)
			lg.waitLog(t, "synced 5 ")
			edit(t, path, "port_value: 50051", "port_value: 50061")
			lg.waitLog(t, "newest "+tc.short+" v2: 5/5 clients")
		})
	}
}

// bannerPath is the path of the demo's resource file named file, as the
// demo's banner prints it.
func bannerPath(t *testing.T, demo *process, file string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s+(/\S+/` + regexp.QuoteMeta(file) + `)$`)
	var path string
	xdstest.Poll(t, "the banner names "+file, func() error {
		m := re.FindStringSubmatch(demo.stdout.String())
		if m == nil {
			return os.ErrNotExist
		}
		path = m[1]
		return nil
	})
	if filepath.Base(path) != file {
		t.Fatalf("banner path %q", path)
	}
	return path
}

// edit replaces old by new in the file at path, as an editor saves it.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadgenOnSyncedUpdates: --on-synced runs its command once every
// client synced (here: the edit of the quick start's loop), and --updates
// ends the run once every client received the update, exit 0; a command
// that fails, or updates that do not come within --duration, exit 1
// saying so. --wait gives up on a target that accepts nothing.
func TestLoadgenOnSyncedUpdates(t *testing.T) {
	demo := startProcess(t, "demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--rest-listen", "127.0.0.1:0")
	s := demo.waitServing(t)
	path := bannerPath(t, demo, "plain-endpoints.yaml")
	lg := func(extra ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		args := append([]string{"loadgen", "--target", s.Listen, "--clients", "3", "--type", "eds", "--names", "demo", "--quiet"}, extra...)
		code := dispatch(context.Background(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := lg("--wait", "5s", "--duration", "30s", "--updates", "1",
		"--on-synced", "sed -i s/50051/50061/ "+path)
	if code != exitOK || !strings.Contains(out, "eds demo v2 (") || !strings.Contains(out, "3 of 3 clients") {
		t.Errorf("loadgen --on-synced EDIT --updates 1 = %d, want 0 and v2 at 3 of 3 clients; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "30s", "--on-synced", "exit 3"}, `loadgen: --on-synced "exit 3": exit status 3`},
		{[]string{"--duration", "300ms", "--updates", "1"}, "loadgen: --updates 1: 0 of 3 clients received them"},
		{[]string{"--target", "127.0.0.1:1", "--wait", "300ms"}, "loadgen: --wait: 127.0.0.1:1 accepted no connection within 300ms"},
	} {
		if code, _, errOut := lg(tc.args...); code != exitFail || !strings.Contains(errOut, tc.want) {
			t.Errorf("loadgen %v = %d, want 1 saying %q; stderr:\n%s", tc.args, code, tc.want, errOut)
		}
	}
}
