package loadgen

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

func TestClientSubscription(t *testing.T) {
	names := []string{"n0", "n1", "n2", "n3", "n4"}
	tests := []struct {
		name string
		cfg  Config
		want [][]string // per client
	}{
		{name: "no window: every name", cfg: Config{Clients: 2, Names: names}, want: [][]string{names, names}},
		{name: "glob", cfg: Config{Clients: 1, Glob: "xdstp://a/t/d/*"}, want: [][]string{{"xdstp://a/t/d/*"}}},
		{name: "window, stride 2, wrapping", cfg: Config{Clients: 4, Names: names, Window: 2, Stride: 2},
			want: [][]string{{"n0", "n1"}, {"n2", "n3"}, {"n4", "n0"}, {"n1", "n2"}}},
		// Default stride: names/clients, at least 1.
		{name: "default stride 1", cfg: Config{Clients: 3, Names: names, Window: 3},
			want: [][]string{{"n0", "n1", "n2"}, {"n1", "n2", "n3"}, {"n2", "n3", "n4"}}},
		{name: "default stride 2", cfg: Config{Clients: 2, Names: names, Window: 3},
			want: [][]string{{"n0", "n1", "n2"}, {"n2", "n3", "n4"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]string
			for i := range tc.cfg.Clients {
				got = append(got, tc.cfg.ClientSubscription(i))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("subscriptions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeClusters(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{cfg: Config{Clients: 3}, want: []string{"loadgen", "loadgen", "loadgen"}},
		{cfg: Config{Clients: 3, NodeCluster: "svc"}, want: []string{"svc", "svc", "svc"}},
		{cfg: Config{Clients: 5, NodeClusters: 2}, want: []string{"loadgen-0", "loadgen-1", "loadgen-0", "loadgen-1", "loadgen-0"}},
	} {
		cfg := tc.cfg.withDefaults()
		var got []string
		for i := range cfg.Clients {
			got = append(got, cfg.nodeCluster(i))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v: node clusters (-want +got):\n%s", tc.cfg, diff)
		}
	}
}

func TestConfigValidateWindow(t *testing.T) {
	ok := Config{Target: "127.0.0.1:1", Clients: 4, Names: []string{"a", "b", "c"}}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr bool
	}{
		{name: "window", mutate: func(c *Config) { c.Window = 3 }},
		{name: "window and stride", mutate: func(c *Config) { c.Window = 2; c.Stride = 5 }},
		{name: "negative window", mutate: func(c *Config) { c.Window = -1 }, wantErr: true},
		{name: "window over the names", mutate: func(c *Config) { c.Window = 4 }, wantErr: true},
		{name: "window of a glob", mutate: func(c *Config) { c.Names = nil; c.Glob = "xdstp://a/t/d/*"; c.Window = 1 }, wantErr: true},
		{name: "stride without a window", mutate: func(c *Config) { c.Stride = 1 }, wantErr: true},
		{name: "negative stride", mutate: func(c *Config) { c.Window = 1; c.Stride = -1 }, wantErr: true},
		{name: "node clusters", mutate: func(c *Config) { c.NodeClusters = 3 }},
		{name: "negative node clusters", mutate: func(c *Config) { c.NodeClusters = -1 }, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			if err := c.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestTallyUpdate(t *testing.T) {
	// Four clients, windows {n0,n1} {n1,n2} {n2,n3} {n3,n0}; the update
	// changes n1 and n2.
	cfg := Config{Clients: 4, Names: []string{"n0", "n1", "n2", "n3"}, Window: 2, Stride: 1}
	changed := []string{"n1", "n2"}
	counts := func(responses, resources, bytes, updated []int64) ClientCounts {
		return ClientCounts{Responses: responses, Resources: resources, Bytes: bytes, Updated: updated}
	}
	before := counts([]int64{1, 1, 1, 1}, []int64{2, 2, 2, 2}, []int64{100, 100, 100, 100}, []int64{0, 0, 0, 0})
	tests := []struct {
		name  string
		after ClientCounts
		want  UpdateTally
	}{
		{
			// Client 0 gets n1, client 1 n1 and n2 in one response, client
			// 2 n2; client 3 nothing.
			name:  "exact",
			after: counts([]int64{2, 2, 2, 1}, []int64{3, 4, 3, 2}, []int64{150, 180, 150, 100}, []int64{1, 2, 1, 0}),
			want: UpdateTally{Updates: 1, Changed: 2, Affected: 3, Unaffected: 1, ChangedInWindows: 4,
				AffectedResponses: 3, AffectedResources: 4, AffectedBytes: 180, AffectedUpdated: 4, Exact: 3},
		},
		{
			// Client 1 gets n1 and n2 in two responses, client 2 its whole
			// window, client 3 an empty response.
			name:  "split, resent and spurious",
			after: counts([]int64{2, 3, 2, 2}, []int64{3, 4, 4, 2}, []int64{150, 200, 190, 110}, []int64{1, 2, 1, 0}),
			want: UpdateTally{Updates: 1, Changed: 2, Affected: 3, Unaffected: 1, ChangedInWindows: 4,
				AffectedResponses: 4, AffectedResources: 5, AffectedBytes: 240, AffectedUpdated: 4, Exact: 1,
				UnaffectedResponses: 1, UnaffectedBytes: 10},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfg.TallyUpdate(changed, before, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tally (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := cfg.TallyUpdate(changed, before, counts(nil, nil, nil, nil)); err == nil {
		t.Errorf("TallyUpdate with counts of 0 clients: no error")
	}
	var sum UpdateTally
	sum.Add(UpdateTally{Updates: 1, Affected: 2, Exact: 1, UnaffectedResponses: 1})
	sum.Add(UpdateTally{Updates: 1, Affected: 3, Exact: 3})
	if diff := cmp.Diff(UpdateTally{Updates: 2, Affected: 5, Exact: 4, UnaffectedResponses: 1}, sum); diff != "" {
		t.Errorf("Add (-want +got):\n%s", diff)
	}
}

// TestFleetWindows: clients with their own overlapping windows; one push
// of two names reaches exactly the clients whose windows hold them, each
// in one response with just what changed, and nobody else.
func TestFleetWindows(t *testing.T) {
	const clients = 6
	names := testNames(12)
	for _, variant := range []Variant{Delta, SotW} {
		t.Run(string(variant), func(t *testing.T) {
			o := startOrigin(t, names)
			// Windows {0,1,2} {2,3,4} {4,5,6} {6,7,8} {8,9,10} {10,11,0}.
			cfg := Config{Target: o.addr, Clients: clients, Conns: 2, Variant: variant, Names: names, Window: 3, NodeIDPrefix: "loadgen"}
			f, err := New(cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			stop := runFleet(t, f)
			initial := map[string][]string{}
			for i := range clients {
				initial[fmt.Sprintf("loadgen-%d", i)] = cfg.ClientSubscription(i)
			}
			waitClosed(t, f.Synced(0), "every client synced")
			waitAcked(t, o, initial)
			before := f.ClientCounts()

			changed := []string{names[3], names[11]}
			o.push(t, changed...)
			waitAcked(t, o, map[string][]string{"loadgen-1": {names[3]}, "loadgen-5": {names[11]}})
			select {
			case ev := <-o.acks:
				t.Errorf("an answer after the push reached every affected client: %+v", ev)
			case <-time.After(xdstest.QuietPeriod):
			}
			after := f.ClientCounts()
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}

			got, err := cfg.TallyUpdate(changed, before, after)
			if err != nil {
				t.Fatal(err)
			}
			want := UpdateTally{Updates: 1, Changed: 2, Affected: 2, Unaffected: 4, ChangedInWindows: 2,
				AffectedResponses: 2, AffectedResources: 2, AffectedBytes: got.AffectedBytes, AffectedUpdated: 2, Exact: 2}
			if diff := cmp.Diff(want, got); diff != "" || got.AffectedBytes <= 0 {
				t.Errorf("tally (-want +got):\n%s\naffected bytes %d, want > 0", diff, got.AffectedBytes)
			}
			if s := f.Summary(); s.Samples != 2 || s.Window != 3 || s.Stride != 2 {
				t.Errorf("summary: %d samples, window %d, stride %d; want 2, 3, 2", s.Samples, s.Window, s.Stride)
			}
		})
	}
}

// waitAcked waits until each node in want has answered responses that
// together carried every name listed for it.
func waitAcked(t *testing.T, o *testOrigin, want map[string][]string) {
	t.Helper()
	missing := make(map[string]map[string]bool, len(want))
	for node, names := range want {
		missing[node] = make(map[string]bool, len(names))
		for _, n := range names {
			missing[node][n] = true
		}
	}
	timeout := time.After(xdstest.WaitTimeout)
	for len(missing) > 0 {
		select {
		case ev := <-o.acks:
			for _, n := range ev.names {
				delete(missing[ev.node], n)
			}
			if m, ok := missing[ev.node]; ok && len(m) == 0 {
				delete(missing, ev.node)
			}
		case <-timeout:
			t.Fatalf("not answered within %v, by node: %v", xdstest.WaitTimeout, missing)
		}
	}
}
