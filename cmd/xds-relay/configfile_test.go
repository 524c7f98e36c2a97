package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// The config file is not trusted to be what a config file is (issue 26):
// a FIFO, a file of any size, one anyone may write, a directory whose
// other files change all the time. The relay reads it without blocking,
// bounded, and only when its owner and mode say that nobody else wrote it.

// configGrace is the tests' shutdown_grace_period: SIGTERM must end the
// process within it, whatever is at the config path.
const configGrace = 4 * time.Second

// relayConfig is a config the tests start from; level tells one config
// from another (GET /debug/log_level shows the running one).
func relayConfig(level string, watch bool) string {
	return fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nauthorities:\n  - name: a\n    origins: [\"127.0.0.1:1\"]\n"+
		"shutdown_grace_period: %s\ndownstream: {drain_delay: 0s}\nconfig_watch: %t\nlog: {level: %s}\n", configGrace, watch, level)
}

// replaceConfig writes content to a temporary file beside path (mode
// 0600) and renames it over path, as config management does.
func replaceConfig(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fifoOver puts a FIFO that nobody writes to at path.
func fifoOver(t *testing.T, path string) {
	t.Helper()
	tmp := path + ".fifo"
	if err := syscall.Mkfifo(tmp, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// adminClient answers within the deadline or fails: a relay that waits on
// its config file never answers.
var adminClient = &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}

// admin sends method to the admin listener's path; the status code and
// body.
func admin(t *testing.T, method, adminAddr, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wantLevel checks the running config's log level.
func wantLevel(t *testing.T, adminAddr, want, when string) {
	t.Helper()
	if code, got := admin(t, http.MethodGet, adminAddr, "/debug/log_level"); code != http.StatusOK || got != want+"\n" {
		t.Errorf("%s: log level %d %q, want %s", when, code, got, want)
	}
}

// reloadsCounted is xds_relay_config_reloads_total{result}.
func reloadsCounted(t *testing.T, adminAddr, result string) float64 {
	t.Helper()
	_, body := admin(t, http.MethodGet, adminAddr, "/metrics")
	m := regexp.MustCompile(`(?m)^xds_relay_config_reloads_total\{result="` + result + `"\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no xds_relay_config_reloads_total{result=%q} in /metrics", result)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func waitReloads(t *testing.T, adminAddr, result string, n float64) {
	t.Helper()
	xdstest.Poll(t, fmt.Sprintf("%v reloads %s", n, result), func() error {
		if got := reloadsCounted(t, adminAddr, result); got != n {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}

// TestServeConfigFIFO: a FIFO nobody writes to replaces the config file.
// config_watch's look at it, POST /debug/reload and SIGTERM never wait on
// it: the reload answers at once with the reason, a valid config put back
// is applied by the watcher, and SIGTERM ends the process within its grace
// period. Before, the watcher blocked for good in open(), the reload never
// answered, nothing was applied again and SIGTERM did not end the process.
func TestServeConfigFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.yaml")
	replaceConfig(t, path, relayConfig("info", true))
	p := startProcess(t, "serve", "--config", path)
	s := p.waitServing(t)

	fifoOver(t, path)
	waitReloads(t, s.Admin, "untrusted", 1) // the watcher's reload, refused
	if code, body := admin(t, http.MethodPost, s.Admin, "/debug/reload"); code != http.StatusBadRequest ||
		!strings.Contains(body, "not a regular file (a FIFO)") {
		t.Errorf("POST /debug/reload with a FIFO at the config path = %d %q, want 400 naming the FIFO", code, body)
	}
	wantLevel(t, s.Admin, "info", "with a FIFO at the config path")

	replaceConfig(t, path, relayConfig("debug", true))
	waitReloads(t, s.Admin, "ok", 1) // by the watcher: no signal, no POST
	wantLevel(t, s.Admin, "debug", "after a valid config was put back")

	fifoOver(t, path)
	waitReloads(t, s.Admin, "untrusted", 3)
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t); code != exitOK {
		t.Errorf("exit code after SIGTERM = %d, want 0\nstderr:\n%s", code, p.stderr)
	}
	if took := time.Since(start); took > configGrace {
		t.Errorf("SIGTERM with a FIFO at the config path ended the process after %v, more than the grace period %v", took, configGrace)
	}
}

// TestServeConfigTooLarge: a config file over config.MaxFileBytes (a
// valid config, padded with comments) is refused by its size, unread:
// the reload answers 400 naming the bound, the running config stays and
// the relay serves on. Before, any size was read and parsed whole (100 MiB:
// 3.8 GiB and 33 s).
func TestServeConfigTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.yaml")
	replaceConfig(t, path, relayConfig("info", false))
	p := startProcess(t, "serve", "--config", path)
	s := p.waitServing(t)

	const pad = "# a comment line, to make the file larger than config.MaxFileBytes\n"
	big := relayConfig("debug", false) + strings.Repeat(pad, int(config.MaxFileBytes)/len(pad)+1)
	replaceConfig(t, path, big)
	code, body := admin(t, http.MethodPost, s.Admin, "/debug/reload")
	want := fmt.Sprintf("file larger than its bound: %d bytes, more than %d", len(big), config.MaxFileBytes)
	if code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Errorf("POST /debug/reload of a %d-byte config = %d %q, want 400 with %q", len(big), code, body, want)
	}
	if n := reloadsCounted(t, s.Admin, "too_large"); n != 1 {
		t.Errorf("reloads too_large = %v, want 1", n)
	}
	wantLevel(t, s.Admin, "info", "after the oversized config")
	if code := httpStatus(t, "http://"+s.Admin+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz after the oversized config = %d, want 200", code)
	}
}

// TestServeConfigUntrusted: a config file that another user may write
// (mode 0666), or that another user owns, is refused: logged, counted
// (untrusted), the reload answers 400 with the reason, the running config
// stays. Before, it was applied without a word. Changing a file's owner
// needs root; that case is skipped otherwise.
func TestServeConfigUntrusted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   string
	}{
		{"world writable", func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
		}, "mode 0666 lets other users write it"},
		{"another user's", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			if err := os.Chown(path, 12345, 12345); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 12345"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "relay.yaml")
			replaceConfig(t, path, relayConfig("info", false))
			p := startProcess(t, "serve", "--config", path)
			s := p.waitServing(t)

			replaceConfig(t, path, relayConfig("debug", false))
			tc.change(t, path)
			if code, body := admin(t, http.MethodPost, s.Admin, "/debug/reload"); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("POST /debug/reload = %d %q, want 400 with %q", code, body, tc.want)
			}
			p.waitLog(t, `"result":"untrusted"`)
			if n := reloadsCounted(t, s.Admin, "untrusted"); n != 1 {
				t.Errorf("reloads untrusted = %v, want 1", n)
			}
			wantLevel(t, s.Admin, "info", "after the untrusted config")
		})
	}
}

// TestServeConfigRefusedAtStart: serve exits at once (1) with the reason
// when its config file is a FIFO, another user may write it, or it is over
// the bound. Before, a FIFO held the start up for good and the others were
// served.
func TestServeConfigRefusedAtStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"FIFO", func(t *testing.T, path string) { fifoOver(t, path) }, "not a regular file (a FIFO)"},
		{"world writable", func(t *testing.T, path string) {
			replaceConfig(t, path, relayConfig("info", false))
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
		}, "mode 0666 lets other users write it"},
		{"too large", func(t *testing.T, path string) {
			replaceConfig(t, path, relayConfig("info", false)+strings.Repeat("#\n", int(config.MaxFileBytes)/2))
		}, "file larger than its bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "relay.yaml")
			tc.setup(t, path)
			p := startProcess(t, "serve", "--config", path)
			if code := p.waitExit(t); code != exitFail {
				t.Errorf("exit code = %d, want %d", code, exitFail)
			}
			if !strings.Contains(p.stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, p.stderr)
			}
		})
	}
}

// TestConfigWatchNoisyDirectory: while another file of the config's
// directory (a log) is written every 100 ms, a change of the config is
// applied. Before, every event of the directory restarted the debounce
// (300 ms), and the change was never applied.
func TestConfigWatchNoisyDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.yaml")
	replaceConfig(t, path, relayConfig("info", true))
	p := startProcess(t, "serve", "--config", path)
	s := p.waitServing(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		log, err := os.OpenFile(filepath.Join(dir, "relay.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Error(err)
			return
		}
		defer log.Close()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, _ = log.WriteString("a log line\n")
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	replaceConfig(t, path, relayConfig("debug", true))
	waitReloads(t, s.Admin, "ok", 1)
	wantLevel(t, s.Admin, "debug", "after the change, with the log written every 100 ms")
}
