package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	direct := Scenario{Mode: "direct", Variant: "delta", Clients: 10000, FanoutP99MS: 1000}
	tests := []struct {
		name    string
		relayed Scenario
		want    map[string]string
	}{
		{
			name:    "all met",
			relayed: Scenario{Mode: "relayed", Variant: "delta", Clients: 10000, OriginStreams: 1, OriginSubscriptions: 10, FanoutP99MS: 200, RSSPerStreamKiB: 20, StormS: 1, StormCompleted: true},
			want: map[string]string{
				"origin streams (relayed)": "met", "origin subscriptions (relayed)": "met", "fan-out p99 of one update": "met",
				"fan-out p99 vs direct go-control-plane": "met", "relay memory per idle client stream": "met",
				"reconnect storm: extra origin requests": "met", "reconnect storm: all clients served again": "met",
				"cache fan-out allocations per watcher per update": "not measured", "downstream envelope allocations per client per update": "not measured",
			},
		},
		{
			name:    "all missed",
			relayed: Scenario{Mode: "relayed", Variant: "delta", Clients: 10000, OriginStreams: 2, OriginSubscriptions: 20, FanoutP99MS: 900, RSSPerStreamKiB: 40, StormS: 1, StormOriginRequests: 5},
			want: map[string]string{
				"origin streams (relayed)": "missed", "origin subscriptions (relayed)": "missed", "fan-out p99 of one update": "missed",
				"fan-out p99 vs direct go-control-plane": "missed", "relay memory per idle client stream": "missed",
				"reconnect storm: extra origin requests": "missed", "reconnect storm: all clients served again": "missed",
				"cache fan-out allocations per watcher per update": "not measured", "downstream envelope allocations per client per update": "not measured",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Results{Settings: Settings{Resources: 10}, Scenarios: []Scenario{direct, tc.relayed}}
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
	}
	for _, tc := range tests {
		t.Run(tc.workload, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, got{changedPerUpdate(tc.workload, 10), pushURL("h:1", tc.workload)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, ws := range [][]string{{"one"}, {"all"}, {"one", "all"}} {
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

func TestConnsFor(t *testing.T) {
	for clients, want := range map[int]int{1: 1, 150: 1, 1000: 10, 10000: 100, 50000: 500} {
		if got := connsFor(clients); got != want {
			t.Errorf("connsFor(%d) = %d, want %d", clients, got, want)
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
		Settings: Settings{Clients: []int{1000}, Variants: []string{"delta"}, Workloads: []string{"one", "all"}, Resources: 10, ResourceBytes: 1024, Updates: 10},
		Scenarios: []Scenario{
			{Mode: "direct", Variant: "delta", Workload: "one", Clients: 1000, ClientResponsesPerUpdate: 1, ClientResourcesPerUpdate: 1, ClientBytesPerUpdate: 1337, StormCompleted: true},
			{Mode: "relayed", Variant: "delta", Workload: "all", Clients: 1000, ClientResponsesPerUpdate: 1.25, ClientResourcesPerUpdate: 10, ClientBytesPerUpdate: 13370, StormCompleted: true},
			{Mode: "relayed", Variant: "sotw", Workload: "all", Clients: 1000, Error: "boom"},
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
		"| mode | variant | workload | N | RSS before MiB |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table row of a table has as many cells as its header.
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
