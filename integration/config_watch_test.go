package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/configwatch"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// TestConfigWatch: with config_watch, the relay reloads its config file
// when its content changes, without a signal: replaced by rename (config
// management, editors), by a Kubernetes ConfigMap update (the file is a
// symlink through ..data, which is swapped to a new directory), or written
// in place. A changed file that does not validate is refused and the
// running config kept; a fixed one is applied.
func TestConfigWatch(t *testing.T) {
	o := newGCPOrigin(t)
	body := func(level string, maxResources int) string {
		return reloadConfig([][2]string{{"a.example", o.addr}},
			fmt.Sprintf("config_watch: true\nlog: {level: %s}\ncache: {max_resources: %d}\n", level, maxResources))
	}

	// Each layout: how the file is first written, and how it is replaced.
	layouts := []struct {
		name    string
		setup   func(t *testing.T, dir, content string) string // returns the config path
		replace func(t *testing.T, dir, path, content string)
	}{
		{
			name: "rename",
			setup: func(t *testing.T, dir, content string) string {
				path := filepath.Join(dir, "relay.yaml")
				replaceFile(t, path, content)
				return path
			},
			replace: func(t *testing.T, _, path, content string) { replaceFile(t, path, content) },
		},
		{
			name: "kubernetes symlink swap",
			setup: func(t *testing.T, dir, content string) string {
				k8sConfigMapUpdate(t, dir, "relay.yaml", content)
				path := filepath.Join(dir, "relay.yaml")
				if err := os.Symlink(filepath.Join("..data", "relay.yaml"), path); err != nil {
					t.Fatal(err)
				}
				return path
			},
			replace: func(t *testing.T, dir, _, content string) { k8sConfigMapUpdate(t, dir, "relay.yaml", content) },
		},
		{
			name: "written in place",
			setup: func(t *testing.T, dir, content string) string {
				path := filepath.Join(dir, "relay.yaml")
				replaceFile(t, path, content)
				return path
			},
			replace: func(t *testing.T, _, path, content string) {
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			path := l.setup(t, dir, body("warn", 100))
			r, _ := fileRelay(t, path)
			levelURL := "http://" + r.AdminAddr() + relayadmin.LogLevelPath

			l.replace(t, dir, path, body("debug", 100))
			waitRelayMetric(t, r, "reload after the file changed", func(v float64) bool { return v == 1 },
				"xds_relay_config_reloads_total", "result", "ok")
			if code, got := adminDo(t, http.MethodGet, levelURL, ""); code != http.StatusOK || got != "debug\n" {
				t.Errorf("log level after the watched reload = %d %q, want debug", code, got)
			}

			// Refused: the running config stays.
			l.replace(t, dir, path, strings.Replace(body("info", 100), "max_resources: 100", "max_resources: -1", 1))
			waitRelayMetric(t, r, "refused reload of an invalid file", func(v float64) bool { return v == 1 },
				"xds_relay_config_reloads_total", "result", "invalid")
			if _, got := adminDo(t, http.MethodGet, levelURL, ""); got != "debug\n" {
				t.Errorf("log level after a refused file = %q, want debug (the running config)", got)
			}

			// Fixed: applied.
			l.replace(t, dir, path, body("error", 100))
			waitRelayMetric(t, r, "reload of the fixed file", func(v float64) bool { return v == 2 },
				"xds_relay_config_reloads_total", "result", "ok")
			if _, got := adminDo(t, http.MethodGet, levelURL, ""); got != "error\n" {
				t.Errorf("log level after the fixed file = %q, want error", got)
			}

			// One reload per change, however many events it took.
			<-time.After(configwatch.DefaultDebounce + xdstest.QuietPeriod)
			ok := relayMetric(t, r, "xds_relay_config_reloads_total", "result", "ok")
			invalid := relayMetric(t, r, "xds_relay_config_reloads_total", "result", "invalid")
			if ok != 2 || invalid != 1 {
				t.Errorf("reloads: %v ok, %v invalid; want 2 and 1 (one per change of content)", ok, invalid)
			}
		})
	}
}

// k8sConfigMapUpdate does what the kubelet's atomic writer does to a
// ConfigMap volume at dir: the content goes into a new timestamped
// directory, a ..data_tmp symlink to it is renamed over ..data, and the
// old directory is removed. (The file at dir/name is a symlink to
// ..data/name, made once.)
func k8sConfigMapUpdate(t *testing.T, dir, name, content string) {
	t.Helper()
	ts, err := os.MkdirTemp(dir, "..2026_")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
