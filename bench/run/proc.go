package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; 100
// on every Linux architecture Go supports.
const clockTicks = 100

// stopGrace is how long a child gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// child is one process the harness started.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer // written by exec's copier until done closes
	log    string       // path of the stderr log
	done   chan struct{}
	err    error // set before done closes
}

// Pinning is where --pin runs each process: the CPU list given to
// taskset -c, "" for a process left to the scheduler.
type Pinning struct {
	Via     string `json:"via"` // the command that pins: taskset -c CPUS
	Relay   string `json:"relay_cpus"`
	Origin  string `json:"origin_cpus"`
	Loadgen string `json:"loadgen_cpus"`
}

// pinned is --pin's placement: the serving process on CPU 0 (relayed, the
// origin beside the relay: it does little once the relay holds the
// resources) and the load generator alone on CPU 1.
var pinned = Pinning{Via: "taskset -c", Relay: "0", Origin: "0", Loadgen: "1"}

// start runs bin with args, stderr to logDir/name.log, pinned to the CPU
// list cpus with taskset unless cpus is ""; the process dies with the
// harness (Pdeathsig). taskset execs bin, so the child's pid is bin's.
func start(logDir, name, cpus, bin string, args ...string) (*child, error) {
	c := &child{name: name, done: make(chan struct{}), log: filepath.Join(logDir, name+".log")}
	f, err := os.Create(c.log)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	if cpus != "" {
		args = append([]string{"-c", cpus, bin}, args...)
		bin = "taskset"
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Stdout = &c.stdout
	c.cmd.Stderr = f
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to stopGrace, then kills.
func (c *child) stop() error { return c.stopWithin(stopGrace) }

// stopWithin sends SIGTERM, waits up to grace, then kills.
func (c *child) stopWithin(grace time.Duration) error {
	if c.exited() {
		return c.err
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM) // it may have just exited
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s: did not exit within %v of SIGTERM; killed", c.name, grace)
	}
	return c.err
}

// logTail returns the end of the child's stderr log, for error messages.
func (c *child) logTail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return strings.TrimSpace(string(b))
}

// cpuSeconds is utime+stime of pid, from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(ut+st) / clockTicks, nil
}

// rssKiB is VmRSS of pid, from /proc/PID/status.
func rssKiB(pid int) (float64, error) { return statusKiB(pid, "VmRSS") }

// peakRSSKiB is VmHWM of pid, from /proc/PID/status: its largest RSS
// since it started, or since resetPeakRSS.
func peakRSSKiB(pid int) (float64, error) { return statusKiB(pid, "VmHWM") }

// resetPeakRSS sets pid's VmHWM to its RSS now (writing 5 to
// /proc/PID/clear_refs), so that peakRSSKiB reads the peak of what follows.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// statusKiB is field (a kB figure) of pid's /proc/PID/status.
func statusKiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// RuntimeMemory is what a process's Go runtime reports on its /metrics
// (Prometheus's Go collector, on the relay's admin address and on the
// origin's control address alike).
type RuntimeMemory struct {
	HeapInuseBytes  float64 `json:"heap_inuse_bytes"`  // go_memstats_heap_inuse_bytes
	StackInuseBytes float64 `json:"stack_inuse_bytes"` // go_memstats_stack_inuse_bytes
	Goroutines      float64 `json:"goroutines"`        // go_goroutines
}

// runtimeMemory reads GET http://admin/metrics.
func runtimeMemory(admin string) (m RuntimeMemory, err error) {
	err = getMetrics(admin, func(r io.Reader) (err error) {
		m, err = parseRuntimeMemory(r)
		return err
	})
	return m, err
}

// metricSum reads GET http://admin/metrics and sums every series of name.
func metricSum(admin, name string) (sum float64, err error) {
	err = getMetrics(admin, func(r io.Reader) (err error) {
		sum, err = parseMetricSum(r, name)
		return err
	})
	return sum, err
}

// getMetrics reads GET http://admin/metrics with parse.
func getMetrics(admin string, parse func(io.Reader) error) error {
	url := "http://" + admin + "/metrics"
	resp, err := httpClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := parse(resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// parseMetricSum sums the values of every series of name in a Prometheus
// text exposition ("name{labels} value" or "name value"); 0 when none.
func parseMetricSum(r io.Reader, name string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if n, _, _ := strings.Cut(series, "{"); n != name {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return sum, fmt.Errorf("%s: %w", series, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// parseRuntimeMemory picks RuntimeMemory's figures out of Prometheus's
// text format; each must be there.
func parseRuntimeMemory(r io.Reader) (RuntimeMemory, error) {
	var m RuntimeMemory
	want := map[string]*float64{
		"go_memstats_heap_inuse_bytes":  &m.HeapInuseBytes,
		"go_memstats_stack_inuse_bytes": &m.StackInuseBytes,
		"go_goroutines":                 &m.Goroutines,
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // "name value"; comments start with "#"
		if len(f) < 2 || want[f[0]] == nil {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", f[0], err)
		}
		*want[f[0]] = v
		delete(want, f[0])
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if len(want) > 0 {
		missing := slices.Sorted(maps.Keys(want))
		return m, fmt.Errorf("no %s", strings.Join(missing, ", "))
	}
	return m, nil
}

// freePort returns a loopback address nothing listens on right now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// getJSON decodes GET url into v.
func getJSON(url string, v any) error {
	resp, err := httpClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// post sends an empty POST to url.
func post(url string) error { return postJSON(url, nil) }

// postJSON sends an empty POST to url and decodes the answer into v,
// unless v is nil.
func postJSON(url string, v any) error {
	resp, err := httpClient.Post(url, "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	if v == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("POST %s: decode the answer: %w", url, err)
	}
	return nil
}

// pollInterval is how often the harness polls a child's status.
const pollInterval = 20 * time.Millisecond

// waitUntil polls cond until it holds, fails, ctx ends or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		var f fatal
		if errors.As(err, &f) {
			return fmt.Errorf("%s: %w", what, f.error)
		}
		last = err
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s: not within %v: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// fatal wraps an error that ends a waitUntil at once.
type fatal struct{ error }

// waitListening waits until something accepts TCP connections on addr.
func waitListening(ctx context.Context, c *child, addr string, timeout time.Duration) error {
	return waitUntil(ctx, timeout, c.name+" listening on "+addr, func() (bool, error) {
		if c.exited() {
			return false, fatal{fmt.Errorf("%s exited: %v; log: %s", c.name, c.err, c.logTail())}
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err
		}
		conn.Close()
		return true, nil
	})
}

// machineBusySeconds is the CPU time the machine spent busy: user, nice,
// system, irq and softirq of /proc/stat's cpu line (not idle, iowait,
// steal, or guest, which user already counts).
func machineBusySeconds() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i == 3 || i == 4 || i >= 7 { // idle, iowait, steal, guest, guest_nice
			continue
		}
		busy += n
	}
	return float64(busy) / clockTicks, nil
}
