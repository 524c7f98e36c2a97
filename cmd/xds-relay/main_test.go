package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // substrings
		wantStderr []string
	}{
		{name: "validate example", args: []string{"validate", "--config", "../../config/example.yaml"},
			wantCode: exitOK, wantStdout: []string{"config OK\n"}},
		{name: "validate three mistakes", args: []string{"validate", "--config", "../../config/testdata/three_mistakes.yaml"},
			wantCode: exitFail, wantStdout: []string{
				"three_mistakes.yaml: listen (line 3): ",
				"three_mistakes.yaml: authorities[0].transport (line 8): ",
				"three_mistakes.yaml: cache.max_bytes (line 11): ",
			}},
		{name: "validate missing file", args: []string{"validate", "--config", "nope.yaml"},
			wantCode: exitFail, wantStdout: []string{"config: read: open nope.yaml: no such file or directory"}},
		{name: "validate without --config", args: []string{"validate"},
			wantCode: exitUsage, wantStderr: []string{"--config FILE is required", "usage: xds-relay validate --config FILE"}},
		{name: "validate unknown flag", args: []string{"validate", "--confg", "x"},
			wantCode: exitUsage, wantStderr: []string{"flag provided but not defined: -confg"}},
		{name: "validate extra argument", args: []string{"validate", "--config", "a", "b"},
			wantCode: exitUsage, wantStderr: []string{`unexpected argument "b"`}},
		{name: "serve without --config", args: []string{"serve"},
			wantCode: exitUsage, wantStderr: []string{"--config FILE is required"}},
		{name: "serve bad config", args: []string{"serve", "--config", "../../config/testdata/three_mistakes.yaml"},
			wantCode: exitFail, wantStderr: []string{"xds-relay serve: ", "listen (line 3)", "transport (line 8)", "max_bytes (line 11)"}},
		{name: "version", args: []string{"version"}, wantCode: exitOK, wantStdout: []string{"xds-relay dev (go"}},
		{name: "--version", args: []string{"--version"}, wantCode: exitOK, wantStdout: []string{"xds-relay dev (go"}},
		{name: "-version", args: []string{"-version"}, wantCode: exitOK, wantStdout: []string{"xds-relay dev (go"}},
		{name: "reload: nothing listening", args: []string{"reload", "--admin", "127.0.0.1:1"},
			wantCode: exitFail, wantStderr: []string{"xds-relay reload: POST http://127.0.0.1:1/debug/reload: ", "connection refused"}},
		{name: "reload: extra argument", args: []string{"reload", "now"},
			wantCode: exitUsage, wantStderr: []string{`unexpected argument "now"`, "usage: xds-relay reload [--admin ADDR]"}},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantStdout: []string{"usage: xds-relay <command>", "  serve ", "  validate ", "  demo ", "  version "}},
		{name: "no command", args: nil, wantCode: exitUsage, wantStderr: []string{"usage: xds-relay <command>"}},
		{name: "unknown command", args: []string{"serv"}, wantCode: exitUsage, wantStderr: []string{`unknown command "serv"`, "usage:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, &stdout, &stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, &stdout)
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, &stderr)
				}
			}
		})
	}
}

// TestValidateListsEachProblemOnItsOwnLine is issue #2's acceptance test.
func TestValidateListsEachProblemOnItsOwnLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"validate", "--config", "../../config/testdata/three_mistakes.yaml"}, &stdout, &stderr)
	if code != exitFail {
		t.Errorf("exit code = %d, want %d", code, exitFail)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), &stdout)
	}
	for i, path := range []string{"listen (line 3)", "authorities[0].transport (line 8)", "cache.max_bytes (line 11)"} {
		if !strings.Contains(lines[i], path) {
			t.Errorf("line %d = %q, want it to name %q", i+1, lines[i], path)
		}
	}
}

// The binary is built once, with -race when the tests run with it (so it
// links from the same build cache).
var (
	buildOnce sync.Once
	binDir    string // removed by TestMain
	binPath   string
	buildErr  error
)

func relayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "xds-relay-cmd-test-"); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(binDir, "xds-relay")
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command(goBin, append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is the relay binary running under a test.
type process struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	serves chan servingLog // receives the "relay serving" log line
	logged chan struct{}   // poked (1 slot) after each stderr line
	exited chan error      // receives cmd.Wait's result
}

type servingLog struct {
	Listen string `json:"listen"`
	Admin  string `json:"admin"`
	REST   string `json:"rest_listen"`
	CSDS   string `json:"csds_listen"`
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess runs the binary with args, its temporary directory
// (TMPDIR) one the test owns; it is killed at cleanup if still running.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcessIn(t, t.TempDir(), args...)
}

// startProcessIn is startProcess with tmp as its temporary directory.
func startProcessIn(t *testing.T, tmp string, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:    exec.Command(relayBinary(t), args...),
		stdout: &lockedBuffer{},
		stderr: &lockedBuffer{},
		serves: make(chan servingLog, 1),
		logged: make(chan struct{}, 1),
		exited: make(chan error, 1),
	}
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp) // whatever a kill leaves, the test removes
	p.cmd.Stdout = p.stdout
	pr, pw := io.Pipe()
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.stderr, line)
			select {
			case p.logged <- struct{}{}:
			default:
			}
			if s, ok := parseServing(line); ok {
				p.serves <- s
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		<-scanned
		p.exited <- err
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// parseServing reads the addresses from the "relay serving" log line, in
// the json or the console format.
func parseServing(line string) (servingLog, bool) {
	var j struct {
		Msg string `json:"msg"`
		servingLog
	}
	if json.Unmarshal([]byte(line), &j) == nil && j.Msg == "relay serving" {
		return j.servingLog, true
	}
	const msg = "relay serving\t"
	if i := strings.Index(line, msg); i >= 0 {
		var s servingLog
		if json.Unmarshal([]byte(line[i+len(msg):]), &s) == nil {
			return s, true
		}
	}
	return servingLog{}, false
}

func (p *process) waitServing(t *testing.T) servingLog {
	t.Helper()
	select {
	case s := <-p.serves:
		return s
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("relay exited before serving: %v\nstderr:\n%s", err, p.stderr)
	case <-time.After(xdstest.WaitTimeout):
		t.Fatalf("relay not serving after %v\nstderr:\n%s", xdstest.WaitTimeout, p.stderr)
	}
	return servingLog{}
}

// waitLog waits until stderr contains text.
func (p *process) waitLog(t *testing.T, text string) {
	t.Helper()
	xdstest.Await(t, fmt.Sprintf("%q logged", text), p.logged, func() error {
		if s := p.stderr.String(); !strings.Contains(s, text) {
			return fmt.Errorf("stderr:\n%s", s)
		}
		return nil
	})
}

// waitExit returns the exit code.
func (p *process) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(xdstest.WaitTimeout):
		t.Fatalf("relay did not exit within %v\nstderr:\n%s", xdstest.WaitTimeout, p.stderr)
	}
	return -1
}

func writeConfig(t *testing.T, listen, admin string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.yaml")
	cfg := fmt.Sprintf("listen: %q\nadmin: %q\nauthorities:\n  - name: a\n    origins: [\"127.0.0.1:1\"]\nshutdown_grace_period: 5s\ndownstream: {drain_delay: 0s}\n", listen, admin)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeShutsDownOnSignal(t *testing.T) {
	tests := []struct {
		name string
		args func(t *testing.T) []string
		sig  syscall.Signal
	}{
		{name: "serve SIGTERM", sig: syscall.SIGTERM, args: func(t *testing.T) []string {
			return []string{"serve", "--config", writeConfig(t, "127.0.0.1:0", "127.0.0.1:0")}
		}},
		{name: "serve SIGINT", sig: syscall.SIGINT, args: func(t *testing.T) []string {
			return []string{"serve", "--config", writeConfig(t, "127.0.0.1:0", "127.0.0.1:0")}
		}},
		{name: "demo SIGTERM", sig: syscall.SIGTERM, args: func(t *testing.T) []string {
			return []string{"demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--rest-listen", "127.0.0.1:0"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProcess(t, tt.args(t)...)
			s := p.waitServing(t)
			for _, path := range []string{"/healthz", "/readyz"} {
				if code := httpStatus(t, "http://"+s.Admin+path); code != http.StatusOK {
					t.Errorf("GET %s = %d, want 200", path, code)
				}
			}
			if err := p.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			if code := p.waitExit(t); code != exitOK {
				t.Errorf("exit code after %v = %d, want 0\nstderr:\n%s", tt.sig, code, p.stderr)
			}
			if !strings.Contains(p.stderr.String(), "relay stopped") {
				t.Errorf("no clean-stop log line:\n%s", p.stderr)
			}
			for _, addr := range []string{s.Listen, s.Admin} {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Errorf("%s still bound after exit: %v", addr, err)
					continue
				}
				l.Close()
			}
		})
	}
}

func TestServeFailsFast(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: nope\nauthorities: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	busyListen, busyAdmin := writeConfig(t, busy.Addr().String(), "127.0.0.1:0"), writeConfig(t, "127.0.0.1:0", busy.Addr().String())
	// The relay's own listen address as its origin: refused before
	// anything is bound (nothing listens on the port).
	self := filepath.Join(t.TempDir(), "self.yaml")
	if err := os.WriteFile(self, []byte("listen: 0.0.0.0:28123\nadmin: 127.0.0.1:0\nauthorities:\n  - name: a\n    origins: [\"localhost:28123\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantStderr []string
	}{
		{name: "busy listen port", args: []string{"serve", "--config", busyListen},
			wantStderr: []string{fmt.Sprintf("xds-relay serve: listen %s: address already in use: another process (another xds-relay?) listens there; stop it, or set listen in %s to a free address\n", busy.Addr(), busyListen)}},
		{name: "busy admin port", args: []string{"serve", "--config", busyAdmin},
			wantStderr: []string{fmt.Sprintf("xds-relay serve: admin %s: address already in use: another process (another xds-relay?) listens there; stop it, or set admin in %s to a free address\n", busy.Addr(), busyAdmin)}},
		{name: "bad config", args: []string{"serve", "--config", bad},
			wantStderr: []string{"listen (line 1): \"nope\" is not host:port", "authorities (line 2): at least one authority is required"}},
		{name: "origin is the relay itself", args: []string{"serve", "--config", self},
			wantStderr: []string{`self.yaml: authorities[0].origins[0] (line 5): "localhost:28123" is this relay's own listen address (0.0.0.0:28123) ("localhost" resolves to 127.0.0.1): the relay would ask itself`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProcess(t, tt.args...)
			if code := p.waitExit(t); code != exitFail {
				t.Errorf("exit code = %d, want %d", code, exitFail)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(p.stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, p.stderr)
				}
			}
		})
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.yaml")
	cfg := "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nauthorities: [{name: a, origins: [\"127.0.0.1:1\"]}]\nshutdown_grace_period: 1h\nrest_listen: 127.0.0.1:0\ndownstream: {drain_delay: 0s}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "serve", "--config", path)
	s := p.waitServing(t)
	// A request whose handler is running keeps the graceful shutdown
	// waiting (up to the 1h grace period): a REST poll (on rest_listen)
	// whose body never comes. "100 Continue" proves the handler has
	// started reading it.
	conn, err := net.Dial("tcp", s.REST)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(xdstest.WaitTimeout)); err != nil {
		t.Fatal(err)
	}
	req := "POST /v3/discovery:clusters HTTP/1.1\r\nHost: relay\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 Continue") {
		t.Fatalf("REST poll status line = %q, %v; want 100 Continue", status, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "shutting down; signal again to exit at once")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("exit = %v, want killed by SIGTERM", err)
		}
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("second SIGTERM did not end the process")
	}
}

// TestSIGHUPReloads: SIGHUP re-reads the config file; a valid one is
// applied, an invalid one is logged and refused, and the process never
// exits on SIGHUP.
func TestSIGHUPReloads(t *testing.T) {
	path := writeConfig(t, "127.0.0.1:0", "127.0.0.1:0")
	p := startProcess(t, "serve", "--config", path)
	s := p.waitServing(t)
	write := func(content string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as config management replaces files
			t.Fatal(err)
		}
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(string(orig) + "cache: {max_resources: 5}\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, `"msg":"config reloaded"`)
	write(string(orig) + "cache: {max_resources: -5}\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "cache.max_resources (line 8): must not be negative")
	// The log's problems are the problems alone: the first carries no
	// prefix of the refusal's own.
	problem := path + ": cache.max_resources (line 8): must not be negative, got -5"
	if got := refusedProblems(t, p.stderr.String()); !slices.Equal(got, []string{problem}) {
		t.Errorf("the refused reload's logged problems = %q, want [%q]", got, problem)
	}
	select {
	case err := <-p.exited:
		t.Fatalf("relay exited after SIGHUP: %v\nstderr:\n%s", err, p.stderr)
	default:
	}
	if code := httpStatus(t, "http://"+s.Admin+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz after SIGHUPs = %d, want 200", code)
	}

	// xds-relay reload, for images without kill: the same, by the admin
	// endpoint; the answer printed, exit 0 when reloaded, 1 when refused.
	reload := func(wantCode int, wantStdout string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), []string{"reload", "--admin", s.Admin}, &stdout, &stderr)
		if code != wantCode || !strings.Contains(stdout.String(), wantStdout) {
			t.Errorf("xds-relay reload = %d, stdout %q, stderr %q; want %d, stdout with %q", code, &stdout, &stderr, wantCode, wantStdout)
		}
	}
	// The refusal on its own line, then each problem as validate prints it.
	reload(exitFail, "400 Bad Request: config reload refused; the running config is kept:\n"+problem+"\n")
	write(string(orig) + "cache: {max_resources: 7}\n")
	reload(exitOK, "config reloaded")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t); code != exitOK {
		t.Errorf("exit code = %d, want 0\nstderr:\n%s", code, p.stderr)
	}
}

// refusedProblems is the problems list of the last "config reload
// refused" line of a JSON log.
func refusedProblems(t *testing.T, log string) []string {
	t.Helper()
	var last []string
	for _, line := range strings.Split(log, "\n") {
		var j struct {
			Msg      string   `json:"msg"`
			Problems []string `json:"problems"`
		}
		if json.Unmarshal([]byte(line), &j) == nil && strings.HasPrefix(j.Msg, "config reload refused") {
			last = j.Problems
		}
	}
	return last
}
