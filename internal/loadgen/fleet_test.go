package loadgen

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("xdstp://bench.test/envoy.config.endpoint.v3.ClusterLoadAssignment/c/%d", i)
	}
	return names
}

func nodeIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("loadgen-%d", i)
	}
	return ids
}

// runFleet starts f.Run and stops it at cleanup; the returned func stops it
// early and reports Run's error.
func runFleet(t *testing.T, f *Fleet) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	stopped := false
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(xdstest.WaitTimeout):
		t.Fatalf("%s: not within %v", what, xdstest.WaitTimeout)
	}
}

// waitAcks waits until every node has ACKed (or, with nack, NACKed)
// responses that together carried every one of names.
func waitAcks(t *testing.T, o *testOrigin, nodes, names []string, nack bool) {
	t.Helper()
	missing := make(map[string]map[string]bool, len(nodes))
	for _, n := range nodes {
		missing[n] = make(map[string]bool, len(names))
		for _, name := range names {
			missing[n][name] = true
		}
	}
	timeout := time.After(xdstest.WaitTimeout)
	for len(missing) > 0 {
		select {
		case ev := <-o.acks:
			if ev.nack != nack || missing[ev.node] == nil {
				continue
			}
			for _, name := range ev.names {
				delete(missing[ev.node], name)
			}
			if len(missing[ev.node]) == 0 {
				delete(missing, ev.node)
			}
		case <-timeout:
			t.Fatalf("not (nack=%v) answered within %v, by node: %v", nack, xdstest.WaitTimeout, missing)
		}
	}
}

// outcome is what a smoke run must observe.
type outcome struct {
	Clients, Synced        int64
	StreamsOpen            int64
	StreamErrors           int64
	EveryResponseAnswered  bool
	AllAcked, AllNacked    bool
	Samples                int
	LatencySource          string
	VersionsSeenAtLeastTwo bool
	// What the fleet received is what the origin sent.
	ResponsesAsSent, BytesAsSent bool
}

func TestFleetSmoke(t *testing.T) {
	const clients = 10
	names := testNames(3)
	tests := []struct {
		name    string
		variant Variant
		nack    float64
		pushed  []string // changed by the one push, in one response
	}{
		{name: "delta", variant: Delta, pushed: names[1:2]},
		{name: "sotw", variant: SotW, pushed: names[1:2]},
		{name: "delta nacks everything", variant: Delta, nack: 1, pushed: names[1:2]},
		{name: "sotw nacks everything", variant: SotW, nack: 1, pushed: names[1:2]},
		{name: "delta push of all", variant: Delta, pushed: names},
		{name: "sotw push of all", variant: SotW, pushed: names},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, names)
			f, err := New(Config{Target: o.addr, Clients: clients, Conns: 3, Variant: tc.variant, Names: names, NackFraction: tc.nack, NodeIDPrefix: "loadgen"})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			stop := runFleet(t, f)
			nack := tc.nack == 1

			waitClosed(t, f.Synced(0), "every client synced")
			waitAcks(t, o, nodeIDs(clients), names, nack)
			o.push(t, tc.pushed...)
			waitAcks(t, o, nodeIDs(clients), tc.pushed, nack)
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}

			s := f.Summary()
			got := outcome{
				Clients:                int64(s.Clients),
				Synced:                 s.Synced,
				StreamsOpen:            s.StreamsOpen,
				StreamErrors:           s.StreamErrors,
				EveryResponseAnswered:  s.Acks+s.Nacks == s.Responses,
				AllAcked:               s.Nacks == 0 && s.Acks > 0,
				AllNacked:              s.Acks == 0 && s.Nacks > 0,
				Samples:                s.Samples,
				LatencySource:          s.LatencySource,
				VersionsSeenAtLeastTwo: s.VersionsSeen >= len(names)+1,
			}
			if !nack { // go-control-plane answers a SotW NACK with a resend: some are in flight at the stop
				got.ResponsesAsSent = s.Responses == o.responses.Load()
				got.BytesAsSent = s.BytesReceived == o.bytes.Load() && s.BytesReceived > 0
			}
			want := outcome{
				Clients:                clients,
				Synced:                 clients,
				EveryResponseAnswered:  true,
				AllAcked:               !nack,
				AllNacked:              nack,
				Samples:                clients * len(tc.pushed), // one push: a sample per client and resource it changed
				LatencySource:          "origin-stamp",
				VersionsSeenAtLeastTwo: true,
				ResponsesAsSent:        !nack,
				BytesAsSent:            !nack,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("summary (-want +got):\n%s\nlast error: %s", diff, s.LastError)
			}
			if err := s.SyncError(); err != nil {
				t.Errorf("SyncError of a synced fleet: %v", err)
			}
		})
	}
}

func TestFleetReconnectStorm(t *testing.T) {
	const clients = 10
	names := testNames(2)
	o := startOrigin(t, names)
	f, err := New(Config{Target: o.addr, Clients: clients, Conns: 2, Names: names, NodeIDPrefix: "loadgen"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	stop := runFleet(t, f)
	waitClosed(t, f.Synced(0), "initial sync")
	waitAcks(t, o, nodeIDs(clients), names, false)
	f.Reconnect()
	waitClosed(t, f.Synced(1), "sync after the reconnect storm")
	waitAcks(t, o, nodeIDs(clients), names, false)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := f.Summary()
	type storms struct {
		Opened    int64
		Storms    int
		Completed bool
		Samples   int
	}
	got := storms{Opened: s.StreamsOpened, Storms: len(s.Storms), Samples: s.Samples}
	if len(s.Storms) == 1 {
		got.Completed = s.Storms[0].Completed
	}
	// Resynced resources are initial state, never fan-out samples.
	want := storms{Opened: 2 * clients, Storms: 1, Completed: true, Samples: 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after one storm (-want +got):\n%s", diff)
	}
}

// TestFleetNodeIDs: the clients of two load generators against one server
// present distinct node ids (each fleet draws its own prefix), and
// NodeIDPrefix sets them.
func TestFleetNodeIDs(t *testing.T) {
	names := testNames(1)
	o := startOrigin(t, names)
	var prefixes []string
	for _, prefix := range []string{"", "", "edge-7"} {
		f, err := New(Config{Target: o.addr, Clients: 2, Names: names, NodeIDPrefix: prefix})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		runFleet(t, f)
		waitClosed(t, f.Synced(0), "every client synced")
		prefixes = append(prefixes, f.Summary().NodeIDPrefix)
	}
	if prefixes[0] == prefixes[1] || prefixes[2] != "edge-7" {
		t.Errorf("node id prefixes %q: want two distinct defaults, then edge-7", prefixes)
	}
	o.mu.Lock()
	seen := make(map[string]bool)
	for _, id := range o.nodes {
		seen[id] = true
	}
	o.mu.Unlock()
	var want []string
	for _, p := range prefixes {
		want = append(want, p+"-0", p+"-1")
	}
	for _, id := range want {
		if !seen[id] {
			t.Errorf("the origin saw node ids %v, want %v", seen, want)
			break
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the origin saw %d distinct node ids, want %d: %v", len(seen), len(want), seen)
	}
}

// TestFleetWildcard: clients that ask for the wildcard ("*") are synced
// once the server answers it, and hold every resource it sent.
func TestFleetWildcard(t *testing.T) {
	names := testNames(3)
	for _, variant := range []Variant{Delta, SotW} {
		t.Run(string(variant), func(t *testing.T) {
			o := startOrigin(t, names)
			f, err := New(Config{Target: o.addr, Clients: 2, Variant: variant, Names: []string{"*"}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			stop := runFleet(t, f)
			waitClosed(t, f.Synced(0), "every wildcard client synced")
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			s := f.Summary()
			var held []string
			for _, v := range s.Versions {
				if v.Clients == 2 {
					held = append(held, v.Name)
				}
			}
			if diff := cmp.Diff(names, held); diff != "" || s.SyncError() != nil {
				t.Errorf("held by both clients (-want +got):\n%s\nsync error: %v", diff, s.SyncError())
			}
		})
	}
}
