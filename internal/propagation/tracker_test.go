package propagation

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestChange is a change with no ledger (no metric series).
func newTestChange(arrived time.Time) *Change {
	return &Change{id: changeIDs.Add(1), authority: "a.example", typeURL: "type.googleapis.com/t", arrived: arrived}
}

// The attribution rules of Tracker, one case each: what the stream's
// changes end up counted as.
func TestTrackerRules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ack := func(tr *Tracker, seq uint64) { tr.Answered(seq, seq-1, nil, t0.Add(time.Second)) }
	nack := func(tr *Tracker, seq, accepted uint64) {
		tr.Answered(seq, accepted, &Nack{Node: "n1", Code: 3, Message: "bad"}, t0.Add(time.Second))
	}
	tests := []struct {
		name string
		run  func(tr *Tracker, c1, c2 *Change)
		want [2]Counts // c1's, c2's
	}{
		{name: "ACK of the response", run: func(tr *Tracker, c1, _ *Change) {
			tr.Sent(c1, 1, 2, t0)
			ack(tr, 1)
		}, want: [2]Counts{{Sent: 1, Acked: 1}}},
		{name: "ACK of an earlier response leaves it pending", run: func(tr *Tracker, c1, _ *Change) {
			tr.Sent(c1, 2, 1, t0)
			ack(tr, 1)
		}, want: [2]Counts{{Sent: 1, Pending: 1}}},
		{name: "ACK of a later response settles earlier changes", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Sent(c2, 2, 1, t0)
			ack(tr, 2)
		}, want: [2]Counts{{Sent: 1, Acked: 1}, {Sent: 1, Acked: 1}}},
		{name: "more of a pending change moves it to the later response", run: func(tr *Tracker, c1, _ *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Sent(c1, 2, 1, t0)
			ack(tr, 1)
		}, want: [2]Counts{{Sent: 1, Pending: 1}}},
		{name: "NACK of the response", run: func(tr *Tracker, c1, _ *Change) {
			tr.Sent(c1, 1, 1, t0)
			nack(tr, 1, 0)
		}, want: [2]Counts{{Sent: 1, Nacked: 1}}},
		{name: "NACK: earlier changes the client says it accepted are ACKed", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Sent(c2, 2, 1, t0)
			nack(tr, 2, 1)
		}, want: [2]Counts{{Sent: 1, Acked: 1}, {Sent: 1, Nacked: 1}}},
		{name: "NACK: earlier changes after what it accepted are NACKed", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Sent(c2, 2, 1, t0)
			nack(tr, 2, 0)
		}, want: [2]Counts{{Sent: 1, Nacked: 1}, {Sent: 1, Nacked: 1}}},
		{name: "a later ACK does not undo a NACK", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			nack(tr, 1, 0)
			tr.Sent(c2, 2, 1, t0)
			ack(tr, 2)
		}, want: [2]Counts{{Sent: 1, Nacked: 1}, {Sent: 1, Acked: 1}}},
		{name: "every resource replaced before the answer: superseded", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 2, t0)
			tr.Replaced(c1)
			tr.Replaced(c1)
			tr.Sent(c2, 2, 2, t0)
			ack(tr, 2)
		}, want: [2]Counts{{Sent: 1, Superseded: 1}, {Sent: 1, Acked: 1}}},
		{name: "every resource replaced, then its own late ACK: ACKed", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Replaced(c1)
			tr.Sent(c2, 2, 1, t0)
			ack(tr, 1)
			ack(tr, 2)
		}, want: [2]Counts{{Sent: 1, Acked: 1}, {Sent: 1, Acked: 1}}},
		{name: "every resource replaced, the stream ends: gone", run: func(tr *Tracker, c1, _ *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Replaced(c1)
			tr.End()
		}, want: [2]Counts{{Sent: 1, Gone: 1}}},
		{name: "some replaced: still ACKed", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 2, t0)
			tr.Replaced(c1)
			tr.Sent(c2, 2, 1, t0)
			ack(tr, 2)
		}, want: [2]Counts{{Sent: 1, Acked: 1}, {Sent: 1, Acked: 1}}},
		{name: "replacing what is not pending changes nothing", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Replaced(c2)
			ack(tr, 1)
		}, want: [2]Counts{{Sent: 1, Acked: 1}}},
		{name: "the stream ends: gone", run: func(tr *Tracker, c1, c2 *Change) {
			tr.Sent(c1, 1, 1, t0)
			tr.Sent(c2, 2, 1, t0)
			tr.End()
		}, want: [2]Counts{{Sent: 1, Gone: 1}, {Sent: 1, Gone: 1}}},
		{name: "sent again after it settled: counted again", run: func(tr *Tracker, c1, _ *Change) {
			tr.Sent(c1, 1, 1, t0)
			ack(tr, 1)
			tr.Sent(c1, 2, 1, t0)
			ack(tr, 2)
		}, want: [2]Counts{{Sent: 2, Acked: 2}}},
		{name: "no record: nothing", run: func(tr *Tracker, _, _ *Change) {
			tr.Sent(nil, 1, 1, t0)
			tr.Replaced(nil)
			ack(tr, 1)
			tr.End()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			c1, c2 := newTestChange(t0), newTestChange(t0)
			tt.run(&tr, c1, c2)
			if diff := cmp.Diff(tt.want, [2]Counts{c1.Counts(), c2.Counts()}); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

// A stream that leaves more than MaxPending changes unanswered: the
// oldest are no longer followed (dropped), and the Tracker stays bounded.
func TestTrackerBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var tr Tracker
	var cs []*Change
	for i := range MaxPending + 3 {
		c := newTestChange(t0)
		cs = append(cs, c)
		tr.Sent(c, uint64(i+1), 1, t0)
	}
	if n := len(tr.Pending()); n != MaxPending {
		t.Fatalf("%d pending, want MaxPending (%d)", n, MaxPending)
	}
	for i, c := range cs[:3] {
		if got := c.Counts(); got.Dropped != 1 || got.Pending != 0 {
			t.Errorf("change %d: %+v, want dropped", i, got)
		}
	}
	tr.Answered(uint64(len(cs)), 0, nil, t0)
	for i, c := range cs[3:] {
		if got := c.Counts(); got.Acked != 1 {
			t.Errorf("change %d: %+v, want ACKed", i+3, got)
		}
	}
	if !tr.Empty() || tr.more != nil {
		t.Errorf("after the ACK: %+v, want empty and no array kept", tr)
	}
}

// What a change keeps of its NACKs: distinct nodes (their first NACK,
// with the names of it their response carried), distinct messages with
// counts, each bounded.
func TestChangeNacks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newTestChange(t0)
	other := newTestChange(t0)
	for i := range MaxNackers + 2 {
		var tr Tracker
		tr.Sent(c, 1, 1, t0)
		msg := fmt.Sprintf("reason %d", i%(MaxReasons+1))
		tr.Answered(1, 0, &Nack{Node: fmt.Sprintf("node-%02d", i/2), Code: 3, Message: msg,
			Names: map[*Change][]string{c: {"a", "b", "c", "d", "e"}, other: {"x"}}}, t0.Add(time.Duration(i)))
	}
	n := c.Counts()
	if n.Nacked != MaxNackers+2 {
		t.Errorf("nacked %d, want %d (every stream)", n.Nacked, MaxNackers+2)
	}
	ns := c.Nackers()
	if len(ns) != (MaxNackers+2)/2 {
		t.Fatalf("%d nackers, want %d distinct nodes", len(ns), (MaxNackers+2)/2)
	}
	if ns[0].Node != "node-00" || ns[0].Message != "reason 0" || !cmp.Equal(ns[0].Names, []string{"a", "b", "c", "d"}) || ns[0].NamesCut != 1 {
		t.Errorf("first nacker %+v, want node-00, its first message, 4 names and 1 cut", ns[0])
	}
	rs := c.Reasons()
	if len(rs) != MaxReasons || rs[0].Streams != 4 {
		t.Errorf("reasons %+v, want %d kept, the first NACKed by 4 streams", rs, MaxReasons)
	}
}

// A client that answers each change before two more arrive makes its
// Tracker allocate nothing: the fan-out's steady state, where the next
// change is sent while the ACK of the previous one is on its way.
func TestTrackerNoAllocations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c1, c2 := newTestChange(t0), newTestChange(t0)
	var tr Tracker
	var seq uint64
	allocs := testing.AllocsPerRun(100, func() {
		seq += 2
		tr.Sent(c1, seq-1, 1, t0)
		tr.Sent(c2, seq, 1, t0)
		tr.Answered(seq, seq-1, nil, t0)
	})
	c1.retire() // its histogram was made at the first ACK
	if allocs != 0 {
		t.Errorf("%v allocations per two changes sent and answered, want 0", allocs)
	}
}
