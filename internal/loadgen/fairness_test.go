package loadgen

import (
	"fmt"
	"testing"

	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// Stalled clients (Config.StallEvery) stop reading while the fleet is
// stalled and resume where they were; the others are served meanwhile,
// and their latency over the phase leaves the stalled ones out.
func TestFleetStall(t *testing.T) {
	const clients = 4 // 0 and 2 stall
	names := testNames(2)
	o := startOrigin(t, names)
	f, err := New(Config{Target: o.addr, Clients: clients, Conns: 1, Names: names, StallEvery: 2, NodeIDPrefix: "loadgen"})
	if err != nil {
		t.Fatal(err)
	}
	runFleet(t, f)
	waitClosed(t, f.Synced(0), "every client synced")
	waitAcks(t, o, nodeIDs(clients), names, false)
	before := f.ClientCounts()

	f.Stall(xdstest.WaitTimeout)
	// A client waiting in Recv when the stall begins reads one more
	// response: the second push is the one it misses.
	reading := []string{"loadgen-1", "loadgen-3"}
	o.push(t, names[0])
	waitAcks(t, o, reading, names[:1], false)
	o.push(t, names[1])
	waitAcks(t, o, reading, names[1:], false)
	during := f.ClientCounts()
	for _, i := range []int{0, 2} {
		if during.Newest[i] >= during.Newest[1] {
			t.Errorf("stalled client %d holds the newest push", i)
		}
	}

	f.Stall(0) // ends it
	xdstest.Poll(t, "stalled clients caught up", func() error {
		now := f.ClientCounts()
		for i := range clients {
			if now.Newest[i] != during.Newest[1] {
				return fmt.Errorf("client %d holds push %d, want %d", i, now.Newest[i], during.Newest[1])
			}
		}
		return nil
	})
	after := f.ClientCounts()
	for i, n := range after.Streams {
		if n != 1 {
			t.Errorf("client %d opened %d streams, want 1", i, n)
		}
	}
	l, err := f.PhaseLatency(PhaseRequest{From: before.Updated, To: during.Updated, ExcludeStalling: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Samples != 2*2 { // two pushes of one resource to the two reading clients
		t.Errorf("samples of the reading clients = %d, want 4", l.Samples)
	}
	if got := f.Stalled(); !got[0] || got[1] || !got[2] || got[3] {
		t.Errorf("Stalled() = %v, want clients 0 and 2", got)
	}
}

// The churning client changes its subscription at the rate asked, reads
// what it is sent, and stops when told (or with the fleet).
func TestFleetChurn(t *testing.T) {
	for _, v := range []Variant{Delta, SotW} {
		t.Run(string(v), func(t *testing.T) {
			names := testNames(3)
			o := startOrigin(t, names)
			f, err := New(Config{Target: o.addr, Clients: 1, Variant: v, Names: names})
			if err != nil {
				t.Fatal(err)
			}
			runFleet(t, f)
			waitClosed(t, f.Synced(0), "synced")
			if err := f.StartChurn(200); err != nil {
				t.Fatal(err)
			}
			xdstest.Poll(t, "the churning client churns", func() error {
				if st := f.Churn(); st.Requests < 10 || st.Responses < 2 || st.Error != "" {
					return fmt.Errorf("%+v", st)
				}
				return nil
			})
			st := f.StopChurn()
			if st.Rate != 200 || st.Requests < 10 || st.Error != "" {
				t.Errorf("churn stats %+v", st)
			}
			if again := f.StopChurn(); again != (ChurnStats{}) {
				t.Errorf("a second stop: %+v, want nothing", again)
			}
		})
	}
}
