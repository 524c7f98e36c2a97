package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/loadgen"
)

func TestParseMicro(t *testing.T) {
	out := []byte(`goos: linux
pkg: github.com/xds-relay/xds-relay/internal/cache
BenchmarkFanout/watchers=100-2  	   37657	      6237 ns/op	    2776 B/op	       8 allocs/op
BenchmarkFanoutResourceSize/watchers=10000/size=1KiB-2	584	396419 ns/op	16.49 B/watcher	0.0009760 allocs/watcher	164861 B/op	9 allocs/op
PASS
pkg: github.com/xds-relay/xds-relay/internal/xdsname
BenchmarkGlobMatch/member-2            	 3030085	        91.81 ns/op	       0 B/op	       0 allocs/op
--- FAIL: BenchmarkBroken
`)
	want := []Micro{
		{Package: "github.com/xds-relay/xds-relay/internal/cache", Name: "BenchmarkFanout/watchers=100-2", NsPerOp: 6237, BytesPerOp: 2776, AllocsPerOp: 8},
		{Package: "github.com/xds-relay/xds-relay/internal/cache", Name: "BenchmarkFanoutResourceSize/watchers=10000/size=1KiB-2",
			NsPerOp: 396419, BytesPerOp: 164861, AllocsPerOp: 9, Extra: map[string]float64{"B/watcher": 16.49, "allocs/watcher": 0.000976}},
		{Package: "github.com/xds-relay/xds-relay/internal/xdsname", Name: "BenchmarkGlobMatch/member-2", NsPerOp: 91.81},
	}
	if diff := cmp.Diff(want, parseMicro(out)); diff != "" {
		t.Errorf("parseMicro (-want +got):\n%s", diff)
	}
}

func TestTrimProcs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"delta/size=1024-2", "delta/size=1024"},
		{"delta/size=1024-16", "delta/size=1024"},
		{"no-suffix", "no-suffix"},
		{"plain", "plain"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := trimProcs(tc.in); got != tc.want {
				t.Errorf("trimProcs(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCheckTargets(t *testing.T) {
	// met and missed are a relayed scenario that meets, or misses, every
	// target against direct.
	direct := Scenario{Mode: "direct", FanoutP99MS: 400, ServingCPUSPerUpdate: 0.6, ClientResponsesPerUpdate: 1, InitialSyncS: 2, StormOriginRequests: 20000}
	met := Scenario{Mode: "relayed", FanoutP99MS: 150, ServingCPUSPerUpdate: 0.2, ClientResponsesPerUpdate: 1, RSSPerStreamKiB: 20, InitialSyncS: 1.5}
	missed := Scenario{Mode: "relayed", FanoutP99MS: 300, ServingCPUSPerUpdate: 0.4, ClientResponsesPerUpdate: 1.00001, RSSPerStreamKiB: 30, InitialSyncS: 2.5, StormOriginRequests: 3}
	at := func(s Scenario, n int, variant, workload string) Scenario {
		s.Clients, s.Variant, s.Workload = n, variant, workload
		return s
	}
	every := func(n int, relayed Scenario) []Scenario {
		var out []Scenario
		for _, v := range []string{"delta", "sotw"} {
			for _, w := range []string{"one", "all"} {
				out = append(out, at(direct, n, v, w), at(relayed, n, v, w))
			}
		}
		return out
	}
	const notMeasured = "not measured"
	allocs := map[string]string{
		"cache fan-out allocations per watcher per update":      notMeasured,
		"downstream envelope allocations per client per update": notMeasured,
	}
	// want is the status of every target: s for those of this run's
	// settings, allocs for the micro-benchmark rows.
	want := func(s string) map[string]string {
		m := map[string]string{
			"fan-out p99, relayed ÷ direct (one, delta)":            s,
			"fan-out p99, relayed ÷ direct (one, sotw)":             s,
			"fan-out p99, relayed ÷ direct (all, delta)":            s,
			"fan-out p99, relayed ÷ direct (all, sotw)":             s,
			"serving CPU per update, relayed ÷ direct (one, delta)": s,
			"serving CPU per update, relayed ÷ direct (all, delta)": s,
			"responses per client per update, relayed (one, delta)": s,
			"responses per client per update, relayed (one, sotw)":  s,
			"responses per client per update, relayed (all, delta)": s,
			"responses per client per update, relayed (all, sotw)":  s,
			"relay memory per idle client stream (delta)":           s,
			"initial sync, relayed vs direct (delta)":               s,
			"reconnect storm: extra origin requests (one, delta)":   s,
			"reconnect storm: extra origin requests (all, delta)":   s,
		}
		for k, v := range allocs {
			m[k] = v
		}
		return m
	}
	both := Settings{Clients: []int{1000, 10000}, Variants: []string{"delta", "sotw"}, Workloads: []string{"one", "all"}, Resources: 10}
	tests := []struct {
		name      string
		settings  Settings
		scenarios []Scenario
		wantN     int
		want      map[string]string
	}{
		{name: "all met at 10000", settings: both, scenarios: append(every(1000, missed), every(10000, met)...), wantN: 10000, want: want("met")},
		{name: "all missed at 10000", settings: both, scenarios: append(every(1000, met), every(10000, missed)...), wantN: 10000, want: want("missed")},
		{name: "10000 failed", settings: both, wantN: 10000, want: want(notMeasured),
			scenarios: func() []Scenario {
				out := every(10000, met)
				for i := range out {
					out[i].Error = "boom"
				}
				return out
			}()},
		{name: "largest N when 10000 was not run", settings: Settings{Clients: []int{50000}, Variants: []string{"delta"}, Workloads: []string{"all"}},
			scenarios: []Scenario{at(direct, 50000, "delta", "all"), at(met, 50000, "delta", "all")}, wantN: 50000,
			want: map[string]string{
				"fan-out p99, relayed ÷ direct (all, delta)":            "met",
				"serving CPU per update, relayed ÷ direct (all, delta)": "met",
				"responses per client per update, relayed (all, delta)": "met",
				"relay memory per idle client stream (delta)":           "met",
				"initial sync, relayed vs direct (delta)":               "met",
				"reconnect storm: extra origin requests (all, delta)":   "met",
				"cache fan-out allocations per watcher per update":      notMeasured,
				"downstream envelope allocations per client per update": notMeasured,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Results{Settings: tc.settings, Scenarios: tc.scenarios}
			if n := targetN(r); n != tc.wantN {
				t.Errorf("targetN = %d, want %d", n, tc.wantN)
			}
			got := map[string]string{}
			for _, tg := range checkTargets(r) {
				got[tg.Name] = tg.Status
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("target status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkloads(t *testing.T) {
	type got struct {
		Changed int
		URL     string
	}
	tests := []struct {
		workload string
		want     got
	}{
		{workload: "one", want: got{Changed: 1, URL: "http://h:1/push"}},
		{workload: "all", want: got{Changed: 10, URL: "http://h:1/push?all=1"}},
		{workload: "envoy", want: got{Changed: 50, URL: "http://h:1/push?count=50"}},
	}
	shape := envoyShape{Resources: 1000, Window: 20, Changed: 50}
	for _, tc := range tests {
		t.Run(tc.workload, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, got{changedPerUpdate(tc.workload, 10, shape), pushURL("h:1", tc.workload, shape)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, ws := range [][]string{{"one"}, {"all"}, {"one", "all"}, {"envoy"}} {
		if err := checkWorkloads(ws); err != nil {
			t.Errorf("checkWorkloads(%q) = %v, want nil", ws, err)
		}
	}
	for _, ws := range [][]string{nil, {"one", "some"}} {
		if err := checkWorkloads(ws); err == nil {
			t.Errorf("checkWorkloads(%q) = nil, want an error", ws)
		}
	}
}

func TestScale(t *testing.T) {
	tests := []struct {
		clients   int
		wantConns int
		wantPush  time.Duration
	}{
		{clients: 1, wantConns: 1, wantPush: pushTimeout},
		{clients: 150, wantConns: 1, wantPush: pushTimeout},
		{clients: 1000, wantConns: 10, wantPush: pushTimeout},
		{clients: 10000, wantConns: 100, wantPush: pushTimeout},
		{clients: 50000, wantConns: 500, wantPush: 5 * pushTimeout},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.clients), func(t *testing.T) {
			if got := connsFor(tc.clients); got != tc.wantConns {
				t.Errorf("connsFor = %d, want %d", got, tc.wantConns)
			}
			if got := scaled(pushTimeout, tc.clients); got != tc.wantPush {
				t.Errorf("scaled(pushTimeout) = %v, want %v", got, tc.wantPush)
			}
		})
	}
}

func TestChartName(t *testing.T) {
	for name, want := range map[string]string{"latest": "fanout_p99.png", "latest-50k": "fanout_p99-50k.png", "mine": "fanout_p99-mine.png"} {
		if got := chartName(name); got != want {
			t.Errorf("chartName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPerUpdateText(t *testing.T) {
	for v, want := range map[float64]string{1: "1.00", 10: "10.00", 1.00001: "1.00001", 0.99999: "0.99999", 1.5: "1.50"} {
		if got := perUpdateText(v); got != want {
			t.Errorf("perUpdateText(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestWriteMarkdown: every scenario row names its workload and carries
// what each client received per update.
func TestWriteMarkdown(t *testing.T) {
	r := Results{
		Settings: Settings{Clients: []int{1000}, Variants: []string{"delta"}, Workloads: []string{"one", "all", "envoy"}, Resources: 10, ResourceBytes: 1024, Updates: 10,
			Envoy: envoyShape{Resources: 1000, Window: 20, Changed: 50}, NameSchemes: []string{"plain"}, Pin: &pinned},
		Scenarios: []Scenario{
			{Mode: "direct", Variant: "delta", Workload: "one", Clients: 1000, ClientResponsesPerUpdate: 1, ClientResourcesPerUpdate: 1, ClientBytesPerUpdate: 1337, StormCompleted: true,
				ServingRSSBeforeKiB: 20 * 1024, ServingRSSAfterKiB: 60 * 1024, RSSPerStreamKiB: 40.96, HeapPerStreamKiB: 20.5, StacksPerStreamKiB: 8.3, RestPerStreamKiB: 12.21, GoroutinesPerStream: 1.004,
				StormPeakRSSKiB: 66 * 1024},
			{Mode: "relayed", Variant: "delta", Workload: "all", Clients: 1000, ClientResponsesPerUpdate: 1.25, ClientResourcesPerUpdate: 10, ClientBytesPerUpdate: 13370, StormCompleted: true},
			{Mode: "relayed", Variant: "sotw", Workload: "all", Clients: 1000, Error: "boom"},
			{Mode: "relayed", Variant: "delta", Workload: "envoy", Names: "plain", Clients: 1000, Window: 20, StormCompleted: true,
				InitialSyncS: 0.5, InitialResponsesPerClient: 1, InitialMaxResponses: 1, InitialResourcesPerClient: 20, InitialBytesPerClient: 21000,
				Envoy: envoyFigures(loadgen.UpdateTally{Updates: 10, Affected: 6000, AffectedResponses: 6000, AffectedResources: 9000, ChangedInWindows: 9000,
					AffectedBytes: 12000000, Exact: 6000, Unaffected: 4000})},
		},
	}
	r.Targets = checkTargets(r)
	var b bytes.Buffer
	writeMarkdown(&b, r)
	md := b.String()
	for _, want := range []string{
		"| mode | variant | workload | N | origin streams | origin subs | origin B/update | responses/client/update | resources/client/update | bytes/client/update | fan-out p50 ms |",
		"| direct | delta | one | 1000 | 0 | 0 | 0 | 1.00 | 1.00 | 1337 | ",
		"| relayed | delta | all | 1000 | 0 | 0 | 0 | 1.25 | 10.00 | 13370 | ",
		"| relayed | sotw | all | 1000 | failed: boom |",
		" Pinned (taskset -c): origin on CPU 0, relay (relayed) on CPU 0, load generator on CPU 1;",
		"| mode | variant | workload | N | RSS before MiB | RSS after MiB | RSS KiB/stream | heap KiB/stream | stacks KiB/stream | rest KiB/stream | goroutines/stream | storm peak RSS MiB | ÷ after |",
		"| direct | delta | one | 1000 | 20.0 | 60.0 | 41.0 | 20.5 | 8.3 | 12.2 | 1.00 | 66.0 | 1.10 |",
		"| relayed | delta | all | 1000 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.00 | - | - |",
		"Targets (N = 1000; they are stated at N = 10000, which this run did not measure;",
		"| responses per client per update, relayed (all, delta) | exactly 1.00 | 1.25 | missed |",
		"| relayed | delta | envoy plain | 1000 | 600.0 | 1.00 | 1.500 | 1.500 | 100.0% | 2000 | 0 | ",
		"| relayed | delta | envoy plain | 1000 | 20 | 0.50 | 1.00 | 1 | 20.00 | 21000 |",
		"| responses to unaffected clients, relayed (envoy plain, delta) | 0 | 0 over 4000 client-updates | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	checkRowWidths(t, md)
}

// checkRowWidths checks that every row of each Markdown table in md has as
// many cells as its header.
func checkRowWidths(t *testing.T, md string) {
	t.Helper()
	cells := 0
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !strings.HasPrefix(line, "|"):
			cells = 0
		case cells == 0:
			cells = strings.Count(line, "|")
		case strings.Count(line, "|") != cells:
			t.Errorf("row with %d separators under a header with %d: %s", strings.Count(line, "|"), cells, line)
		}
	}
}

// TestPeakRSS: resetPeakRSS sets VmHWM to the RSS now, so peakRSSKiB
// reads the peak of what follows, not of the process's life: after
// touching 64 MiB and freeing it, the peak falls back once reset.
func TestPeakRSS(t *testing.T) {
	pid := os.Getpid()
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	before, err := peakRSSKiB(pid)
	if err != nil {
		t.Fatal(err)
	}
	b = nil
	runtime.GC()
	debug.FreeOSMemory()
	if err := resetPeakRSS(pid); err != nil {
		t.Skipf("clear_refs not writable here: %v", err)
	}
	after, err := peakRSSKiB(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after <= 0 || after > before-32*1024 {
		t.Errorf("peak RSS %v KiB before the reset (64 MiB touched and freed), %v after it: want it back below the 64 MiB", before, after)
	}
}

// TestIdlePerStream: what the serving process grew by from before the
// clients to after their sync, per stream, and the RSS not in heap or
// stacks.
func TestIdlePerStream(t *testing.T) {
	sc := Scenario{Clients: 1000, ServingRSSBeforeKiB: 20000, ServingRSSAfterKiB: 60000,
		ServingRuntimeBefore: RuntimeMemory{HeapInuseBytes: 4 << 20, StackInuseBytes: 1 << 20, Goroutines: 30},
		ServingRuntimeAfter:  RuntimeMemory{HeapInuseBytes: 4<<20 + 25*1024*1000, StackInuseBytes: 1<<20 + 8*1024*1000, Goroutines: 2030}}
	sc.idlePerStream()
	got := [5]float64{sc.RSSPerStreamKiB, sc.HeapPerStreamKiB, sc.StacksPerStreamKiB, sc.RestPerStreamKiB, sc.GoroutinesPerStream}
	if want := [5]float64{40, 25, 8, 7, 2}; got != want {
		t.Errorf("RSS, heap, stacks, rest KiB/stream, goroutines/stream = %v, want %v", got, want)
	}
}

func TestParseRuntimeMemory(t *testing.T) {
	const exposition = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 2034
go_info{version="go1.26.8"} 1
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
go_memstats_heap_inuse_bytes 2.6836992e+08
go_memstats_heap_inuse_bytes_total_not_this 7
go_memstats_stack_inuse_bytes 1.6711680e+07
`
	got, err := parseRuntimeMemory(strings.NewReader(exposition))
	if want := (RuntimeMemory{HeapInuseBytes: 268369920, StackInuseBytes: 16711680, Goroutines: 2034}); err != nil || got != want {
		t.Errorf("parseRuntimeMemory = %+v, %v; want %+v", got, err, want)
	}
	_, err = parseRuntimeMemory(strings.NewReader("go_goroutines 3\n"))
	if err == nil || !strings.Contains(err.Error(), "no go_memstats_heap_inuse_bytes, go_memstats_stack_inuse_bytes") {
		t.Errorf("parseRuntimeMemory without memstats: %v, want both named missing", err)
	}
	if _, err := parseRuntimeMemory(strings.NewReader("go_goroutines many\n")); err == nil {
		t.Error("parseRuntimeMemory of a value that is no number: no error")
	}
}

func TestCheckPin(t *testing.T) {
	found := func(string) (string, error) { return "/usr/bin/taskset", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	if err := checkPin(2, found); err != nil {
		t.Errorf("checkPin(2 CPUs, taskset found) = %v", err)
	}
	if err := checkPin(2, missing); err == nil || !strings.Contains(err.Error(), "taskset") || !strings.Contains(err.Error(), "util-linux") {
		t.Errorf("checkPin without taskset = %v, want an error naming taskset and util-linux", err)
	}
	if err := checkPin(1, found); err == nil || !strings.Contains(err.Error(), "needs 2 CPUs") {
		t.Errorf("checkPin(1 CPU) = %v, want an error saying it needs 2 CPUs", err)
	}
}

// TestStartPinned: a child started with a CPU list runs on those CPUs
// only, under its own pid (taskset execs it).
func TestStartPinned(t *testing.T) {
	if err := checkPin(runtime.NumCPU(), exec.LookPath); err != nil {
		t.Skip(err)
	}
	if err := tryPin(pinned); err != nil {
		t.Skip(err)
	}
	c, err := start(t.TempDir(), "sleeper", "1", "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.stopWithin(time.Second) }()
	err = waitUntil(context.Background(), 5*time.Second, "sleep pinned to CPU 1", func() (bool, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.pid()))
		if err != nil {
			return false, err
		}
		st := "\n" + string(b) // every field after a newline
		return strings.Contains(st, "\nName:\tsleep\n") && strings.Contains(st, "\nCpus_allowed_list:\t1\n"), nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	if _, err := cpuSeconds(pid); err != nil {
		t.Errorf("cpuSeconds: %v", err)
	}
	if rss, err := rssKiB(pid); err != nil || rss <= 0 {
		t.Errorf("rssKiB = %v, %v; want > 0", rss, err)
	}
	if _, err := machineBusySeconds(); err != nil {
		t.Errorf("machineBusySeconds: %v", err)
	}
}

func TestProfileSeconds(t *testing.T) {
	tests := []struct{ updates, clients, changed, want int }{
		{updates: 10, clients: 10, changed: 1, want: 2},      // at least 2 s
		{updates: 10, clients: 10000, changed: 1, want: 12},  // 10 × (0.2 + 1.0) s
		{updates: 10, clients: 10000, changed: 10, want: 21}, // 10 × (0.2 + 1.9) s
		{updates: 10, clients: 50000, changed: 10, want: 97}, // 10 × (0.2 + 9.5) s
	}
	for _, tc := range tests {
		if got := profileSeconds(tc.updates, tc.clients, tc.changed); got != tc.want {
			t.Errorf("profileSeconds(%d, %d, %d) = %d, want %d", tc.updates, tc.clients, tc.changed, got, tc.want)
		}
	}
}

func TestEnvoyWorkloadSettings(t *testing.T) {
	type got struct {
		Clients []int
		Schemes []string
		Label   string
	}
	ns := []int{1000, 10000}
	schemes := []string{"xdstp", "plain"}
	tests := []struct {
		workload string
		want     got
	}{
		{workload: "one", want: got{Clients: ns, Schemes: []string{"xdstp"}, Label: "one"}},
		{workload: "all", want: got{Clients: ns, Schemes: []string{"xdstp"}, Label: "all"}},
		// Envoy at the largest N only, with every scheme.
		{workload: "envoy", want: got{Clients: []int{10000}, Schemes: schemes, Label: "envoy plain"}},
	}
	for _, tc := range tests {
		t.Run(tc.workload, func(t *testing.T) {
			g := got{clientsFor(tc.workload, ns), schemesFor(tc.workload, schemes), label(tc.workload, "plain")}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, ss := range [][]string{nil, {"xdstp", "legacy"}} {
		if err := checkNameSchemes(ss); err == nil {
			t.Errorf("checkNameSchemes(%q) = nil, want an error", ss)
		}
	}
	if err := checkNameSchemes(schemes); err != nil {
		t.Errorf("checkNameSchemes(%q) = %v", schemes, err)
	}
	for shape, wantErr := range map[envoyShape]bool{
		{Resources: 1000, Window: 20, Changed: 50, NodeClusters: 1}:   false,
		{Resources: 10, Window: 10, Changed: 10, NodeClusters: 4}:     false,
		{Resources: 0, Window: 1, Changed: 1, NodeClusters: 1}:        true,
		{Resources: 10, Window: 11, Changed: 1, NodeClusters: 1}:      true,
		{Resources: 10, Window: 2, Changed: 0, NodeClusters: 1}:       true,
		{Resources: 1000, Window: 20, Changed: 1001, NodeClusters: 1}: true,
		{Resources: 1000, Window: 20, Changed: 50}:                    true,
	} {
		if err := shape.check(); (err != nil) != wantErr {
			t.Errorf("%+v.check() = %v, want an error: %v", shape, err, wantErr)
		}
	}
}

func TestScenarioHelpers(t *testing.T) {
	if mean, top := meanMax([]int64{1, 1, 4}); mean != 2 || top != 4 {
		t.Errorf("meanMax = %v, %v; want 2, 4", mean, top)
	}
	if mean, top := meanMax(nil); mean != 0 || top != 0 {
		t.Errorf("meanMax(nil) = %v, %v; want 0, 0", mean, top)
	}
	for sc, want := range map[Scenario]int{
		{Resources: 10, Window: 10, ChangedPerUpdate: 1}:     1,
		{Resources: 10, Window: 10, ChangedPerUpdate: 10}:    10,
		{Resources: 1000, Window: 20, ChangedPerUpdate: 50}:  1,
		{Resources: 1000, Window: 20, ChangedPerUpdate: 100}: 2,
	} {
		if got := changedPerClient(&sc); got != want {
			t.Errorf("changedPerClient(R %d, W %d, K %d) = %d, want %d", sc.Resources, sc.Window, sc.ChangedPerUpdate, got, want)
		}
	}
	e := envoyFigures(loadgen.UpdateTally{Updates: 2, Affected: 8, AffectedResponses: 8, AffectedResources: 12, ChangedInWindows: 12, AffectedBytes: 8000, Exact: 6, UnaffectedResponses: 3})
	want := EnvoyFigures{AffectedPerUpdate: 4, ResponsesPerAffected: 1, ResourcesPerAffected: 1.5, ChangedInWindowPerAffected: 1.5, BytesPerAffected: 1000, ExactFraction: 0.75, UnaffectedResponses: 3}
	want.Tally = e.Tally
	if diff := cmp.Diff(want, *e); diff != "" {
		t.Errorf("envoyFigures (-want +got):\n%s", diff)
	}
}

func TestCheckTargetsEnvoy(t *testing.T) {
	tally := func(responses, resources, unaffected int64) *EnvoyFigures {
		return envoyFigures(loadgen.UpdateTally{Updates: 10, Affected: 100, AffectedResponses: responses, AffectedResources: resources,
			ChangedInWindows: 140, Unaffected: 50, UnaffectedResponses: unaffected})
	}
	direct := Scenario{Mode: "direct", FanoutP99MS: 400, ServingCPUSPerUpdate: 0.6, InitialSyncS: 2, InitialResponsesPerClient: 1, InitialMaxResponses: 1,
		StormOriginRequests: 20000, Envoy: tally(100, 140, 0)}
	met := Scenario{Mode: "relayed", FanoutP99MS: 150, ServingCPUSPerUpdate: 0.2, InitialSyncS: 1.5, InitialResponsesPerClient: 1, InitialMaxResponses: 1,
		Envoy: tally(100, 140, 0)}
	missed := Scenario{Mode: "relayed", FanoutP99MS: 300, ServingCPUSPerUpdate: 0.4, InitialSyncS: 2.5, InitialResponsesPerClient: 1.2, InitialMaxResponses: 3, RSSPerStreamKiB: 30,
		StormOriginRequests: 3, Envoy: tally(101, 150, 2)}
	settings := Settings{Clients: []int{10000}, Variants: []string{"delta", "sotw"}, Workloads: []string{"envoy"}, NameSchemes: []string{"xdstp", "plain"}}
	every := func(relayed Scenario) []Scenario {
		var out []Scenario
		for _, v := range settings.Variants {
			for _, names := range settings.NameSchemes {
				for _, s := range []Scenario{direct, relayed} {
					s.Clients, s.Variant, s.Workload, s.Names = 10000, v, "envoy", names
					out = append(out, s)
				}
			}
		}
		return out
	}
	want := func(s string) map[string]string {
		m := map[string]string{
			"relay memory per idle client stream (delta)":           s,
			"initial sync, relayed vs direct (delta)":               s,
			"cache fan-out allocations per watcher per update":      "not measured",
			"downstream envelope allocations per client per update": "not measured",
		}
		for _, names := range settings.NameSchemes {
			c := "envoy " + names
			m["serving CPU per update, relayed ÷ direct ("+c+", delta)"] = s
			m["cold initial sync, relayed vs direct ("+c+", delta)"] = s
			m["reconnect storm: extra origin requests ("+c+", delta)"] = s
			for _, v := range settings.Variants {
				for _, name := range []string{"fan-out p99, relayed ÷ direct", "responses per affected client per update, relayed",
					"resources per affected client per update, relayed", "responses to unaffected clients, relayed",
					"cold initial sync: responses per client, relayed"} {
					m[name+" ("+c+", "+v+")"] = s
				}
			}
		}
		return m
	}
	for name, tc := range map[string]struct {
		relayed Scenario
		want    map[string]string
	}{"met": {met, want("met")}, "missed": {missed, want("missed")}} {
		t.Run(name, func(t *testing.T) {
			got := map[string]string{}
			for _, tg := range checkTargets(Results{Settings: settings, Scenarios: every(tc.relayed)}) {
				got[tg.Name] = tg.Status
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("target status (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScenarioEnvoy runs workload envoy end to end on loopback, small: the
// origin and relay binaries, the load generator, plain names through the
// relay's plain-names authority, direct and relayed. It checks what the
// harness measured hangs together, and, direct, what go-control-plane is
// known to do: one response per affected client holding just what changed
// in its window, nothing for the others.
func TestScenarioEnvoy(t *testing.T) {
	e := tinyEnv(t)
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, mode := range []string{"direct", "relayed"} {
		t.Run(mode, func(t *testing.T) {
			sc := e.runScenario(ctx, mode, "delta", workloadEnvoy, namesPlain, n)
			if sc.Error != "" {
				t.Fatalf("scenario: %s", sc.Error)
			}
			if sc.Envoy == nil {
				t.Fatal("no envoy figures")
			}
			tl := sc.Envoy.Tally
			type shape struct {
				Updates, ClientUpdates, Changed int
				InitialResources                float64
				SamplesAreChangedInWindows      bool
			}
			got := shape{tl.Updates, tl.Affected + tl.Unaffected, tl.Changed, sc.InitialResourcesPerClient,
				int64(sc.FanoutSamples) == tl.ChangedInWindows}
			want := shape{Updates: 2, ClientUpdates: 2 * n, Changed: 2 * 4, InitialResources: 5, SamplesAreChangedInWindows: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			if rt := sc.ServingRuntimeAfter; rt.HeapInuseBytes <= 0 || rt.StackInuseBytes <= 0 || rt.Goroutines <= 0 {
				t.Errorf("serving process's runtime at idle = %+v, want every figure read", rt)
			}
			if mode == "direct" {
				d := *sc.Envoy
				exact := EnvoyFigures{Tally: tl, AffectedPerUpdate: d.AffectedPerUpdate, ResponsesPerAffected: 1,
					ResourcesPerAffected: d.ChangedInWindowPerAffected, ChangedInWindowPerAffected: d.ChangedInWindowPerAffected,
					BytesPerAffected: d.BytesPerAffected, ExactFraction: 1}
				if diff := cmp.Diff(exact, d); diff != "" {
					t.Errorf("go-control-plane direct (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// tinyEnv returns an env for tiny scenarios (2 updates, small resources),
// its logs in a temporary directory; the relay and the origin are built
// once for every test that runs one (bins).
func tinyEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the relay and the origin")
	}
	bins.once.Do(func() { bins.dir, bins.err = buildTiny() })
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return &env{relayBin: filepath.Join(bins.dir, "xds-relay"), originBin: filepath.Join(bins.dir, "origin"), logDir: t.TempDir(),
		resources: 10, updates: 2, envoy: envoyShape{Resources: 40, Window: 5, Changed: 4, NodeClusters: 1},
		resourceSize: 256, authority: "bench.local", goBin: goBinary(), maxRun: time.Minute}
}

// bins holds the relay and origin binaries the tiny scenarios share.
var bins struct {
	once sync.Once
	dir  string
	err  error
}

// buildTiny builds the relay and the origin into a new directory, which
// TestMain removes.
func buildTiny() (string, error) {
	dir, err := os.MkdirTemp("", "bench-run-test-")
	if err != nil {
		return "", err
	}
	for pkg, out := range map[string]string{"../../cmd/xds-relay": filepath.Join(dir, "xds-relay"), "../origin": filepath.Join(dir, "origin")} {
		// Built as this test is (with -race under make test), the packages
		// come from the tests' build cache: no second, uninstrumented build.
		args := []string{"build", "-o", out}
		if raceEnabled {
			args = append(args, "-race")
		}
		if b, err := exec.Command(goBinary(), append(args, pkg)...).CombinedOutput(); err != nil {
			return dir, fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return dir, nil
}

// TestScenarioLedger runs a tiny relayed scenario (20 clients, 2 updates
// of one resource) with the relay's propagation ledger: the ledger counts
// the two updates' changes, each ACKed by every client and nothing
// pending, with a latency distribution (how close it is to the load
// generator's is logged); --propagation=false turns it off in the relay's
// config.
func TestScenarioLedger(t *testing.T) {
	e := tinyEnv(t)
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc := e.runScenario(ctx, "relayed", "delta", workloadOne, namesXDSTP, n)
	if sc.Error != "" {
		t.Fatalf("scenario: %s", sc.Error)
	}
	l := sc.Ledger
	if l == nil {
		t.Fatal("no ledger figures")
	}
	if got, want := *l, (LedgerFigures{Changes: 2, Sent: 2 * n, Acked: 2 * n, P50MS: l.P50MS, P99MS: l.P99MS, MaxMS: l.MaxMS}); got != want {
		t.Errorf("ledger %+v, want %+v", got, want)
	}
	if l.P50MS <= 0 || l.P99MS < l.P50MS || l.MaxMS < l.P99MS {
		t.Errorf("ledger p50/p99/max %.2f/%.2f/%.2f ms: want 0 < p50 ≤ p99 ≤ max", l.P50MS, l.P99MS, l.MaxMS)
	}
	// How close they are depends on the machine's load: measured, not
	// asserted (the run's targets table checks it; make bench runs alone).
	t.Logf("ledger p50/p99 %.2f/%.2f ms, load generator %.2f/%.2f ms", l.P50MS, l.P99MS, sc.FanoutP50MS, sc.FanoutP99MS)

	// --propagation=false: the relay's config turns the ledger off;
	// --delivery=false safe delivery.
	for _, on := range []bool{true, false} {
		cfg, err := config.Parse([]byte(relayConfig("127.0.0.1:1", "127.0.0.1:2", "a", "127.0.0.1:3", n, time.Minute, featuresOff{ledger: !on, delivery: !on})), "relay.yaml")
		if err != nil {
			t.Fatalf("relayConfig(on %v): %v", on, err)
		}
		d := cfg.Delivery
		if cfg.Propagation.Enabled != on || d.Validate != on || (d.NackBreaker.Clients > 0) != on || (d.DeletionGuard.MaxRemovedShare < 1) != on {
			t.Errorf("relayConfig(on %v): propagation.enabled %v, delivery %+v", on, cfg.Propagation.Enabled, d)
		}
	}
}

// TestPoolLedger: the changes that arrived within the update phase are
// pooled, their buckets merged; a quantile is its bucket's middle, never
// above the largest sample.
func TestPoolLedger(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p ledgerPage
	for i, c := range []struct {
		at      time.Duration
		acked   int64
		buckets []ledgerBucket
		maxMS   float64
	}{
		{-time.Second, 5, []ledgerBucket{{0.1, 0.2, 5}}, 200}, // before the phase
		{time.Second, 3, []ledgerBucket{{0.010, 0.011, 2}, {0.020, 0.021, 1}}, 20.5},
		{2 * time.Second, 2, []ledgerBucket{{0.010, 0.011, 1}, {0.030, 0.031, 1}}, 30.2},
	} {
		p.Changes = append(p.Changes, ledgerChange{Arrived: t0.Add(c.at), Sent: c.acked + int64(i), Acked: c.acked, Pending: int64(i),
			MaxMS: c.maxMS, Buckets: c.buckets})
	}
	got := poolLedger(p, t0, t0.Add(3*time.Second))
	want := &LedgerFigures{Changes: 2, Sent: 8, Acked: 5, Pending: 3, P50MS: 10.5, P99MS: 30.2, MaxMS: 30.2}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("pooled (-want +got):\n%s", diff)
	}
}

// buildEnv returns an env for small scenarios (10 resources, 2 updates)
// on the binaries the tiny scenarios share; the caller sets its shape.
func buildEnv(t *testing.T) *env {
	t.Helper()
	e := tinyEnv(t)
	e.envoy, e.resourceSize = envoyShape{}, 0
	return e
}

// TestParseMetricSum: every series of the name is summed, other names
// and comments are not.
func TestParseMetricSum(t *testing.T) {
	const exposition = `# HELP xds_relay_downstream_gather_expired_total Gather windows that expired.
# TYPE xds_relay_downstream_gather_expired_total counter
xds_relay_downstream_gather_expired_total{type="eds"} 3
xds_relay_downstream_gather_expired_total{type="cds"} 2
xds_relay_downstream_gather_expired_total_other 100
go_goroutines 12
`
	got, err := parseMetricSum(strings.NewReader(exposition), "xds_relay_downstream_gather_expired_total")
	if err != nil || got != 5 {
		t.Fatalf("parseMetricSum = %v, %v; want 5", got, err)
	}
	if got, err := parseMetricSum(strings.NewReader(exposition), "absent_total"); err != nil || got != 0 {
		t.Fatalf("parseMetricSum of an absent name = %v, %v; want 0", got, err)
	}
}

// TestLedgerReport: a relayed scenario the ledger measured gets its row
// beside the load generator's figures, and a target: p50 and p99 within
// ledgerAgreeMS of the load generator's.
func TestLedgerReport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p99    float64
		status string
	}{{"agrees", 14, "met"}, {"disagrees", 30, "missed"}} {
		t.Run(tc.name, func(t *testing.T) {
			r := Results{Settings: Settings{Clients: []int{10000}, Variants: []string{"delta"}, Workloads: []string{"one"}},
				Scenarios: []Scenario{{Mode: "relayed", Variant: "delta", Workload: "one", Clients: 10000, FanoutP50MS: 5, FanoutP99MS: 12,
					Ledger: &LedgerFigures{Changes: 10, Sent: 100000, Acked: 100000, P50MS: 4, P99MS: tc.p99}}}}
			var md bytes.Buffer
			writeLedger(&md, r)
			if !strings.Contains(md.String(), fmt.Sprintf("| delta | one | 10000 | 10 | 100000 | 100000 | 0 | 0 | 4.0 | 5.0 | %.1f | 12.0 |", tc.p99)) {
				t.Errorf("ledger table:\n%s", md.String())
			}
			var got string
			for _, tg := range checkTargets(r) {
				if strings.HasPrefix(tg.Name, "propagation ledger against the load generator") {
					got = tg.Status
				}
			}
			if got != tc.status {
				t.Errorf("ledger target %q, want %q", got, tc.status)
			}
		})
	}
}

// TestBenchWritesOnlyIgnoredPaths: the documented quick bench (bench/
// README.md's `--name quick` line), and any run without --publish, writes
// only under paths git ignores, so it leaves `git status` clean; with
// --publish (the make targets) it updates the published results.
func TestBenchWritesOnlyIgnoredPaths(t *testing.T) {
	const repo = "../.."
	if err := exec.Command("git", "-C", repo, "rev-parse").Run(); err != nil {
		t.Skipf("git cannot say what it ignores here (not a checkout, or no git): %v", err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		ignored bool
	}{
		{name: "the documented quick bench", args: documentedRun(t, "--name quick"), ignored: true},
		{name: "profiles of the sync", args: []string{"--profile-sync", "--name", "sync"}, ignored: true},
		{name: "make bench", args: []string{"--publish"}, ignored: false},
		{name: "make bench-50k", args: []string{"--publish", "--name", "latest-50k"}, ignored: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if err != nil {
				t.Fatalf("flags %q: %v", tc.args, err)
			}
			for _, p := range f.outputs() {
				err := exec.Command("git", "-C", repo, "check-ignore", "-q", "--no-index", p).Run()
				if ignored := err == nil; ignored != tc.ignored {
					t.Errorf("%q writes %s: ignored by git = %v, want %v", tc.args, p, ignored, tc.ignored)
				}
			}
		})
	}
}

// TestMakeTargetsPublish: every make target that runs the harness updates
// the published results (--publish).
func TestMakeTargetsPublish(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(mk), "\n") {
		if strings.Contains(line, "run ./bench/run") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			n++
			if !strings.Contains(line, "--publish") {
				t.Errorf("Makefile:%d runs the harness without --publish: %s", i+1, line)
			}
		}
	}
	if n == 0 {
		t.Error("no make target runs ./bench/run")
	}
}

// documentedRun returns the arguments of the `go run ./bench/run` line
// of bench/README.md that holds marker.
func documentedRun(t *testing.T, marker string) []string {
	t.Helper()
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if args, ok := strings.CutPrefix(cmd, "go run ./bench/run "); ok && strings.Contains(cmd, marker) {
			return strings.Fields(args)
		}
	}
	t.Fatalf("bench/README.md has no `go run ./bench/run ... %s` line", marker)
	return nil
}
