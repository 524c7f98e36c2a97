package propagation

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const testType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

// newTestLedger is a ledger on a fake clock, logging to an observer.
func newTestLedger(t *testing.T, now *time.Time) (*Ledger, *observer.ObservedLogs, *prometheus.Registry) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	l := New(Options{Logger: zap.New(core), Registry: reg, Authorities: []string{"a.example"},
		ReportAfter: 10 * time.Second, Now: func() time.Time { return *now }})
	return l, logs, reg
}

// record makes, describes and lists one change as the cache does.
func record(l *Ledger, authority string, arrived time.Time, resources int, first, version string) *Change {
	c := l.Begin(authority, testType, arrived)
	c.Describe(resources, first, version)
	l.Add(c)
	return c
}

// A change's life as the pages show it: converging while the fan-out
// runs or a stream is pending, then converged or NACKed; the line says
// it in words; the metrics count it.
func TestLedgerPage(t *testing.T) {
	now := time.Unix(1000, 0)
	l, _, reg := newTestLedger(t, &now)
	c := record(l, "a.example", now, 10, "cla-0000", "42")
	var trs [4]Tracker
	for i := range trs {
		trs[i].Sent(c, 1, 10, now)
	}
	now = now.Add(20 * time.Millisecond)
	trs[0].Answered(1, 0, nil, now)
	trs[1].Answered(1, 0, nil, now.Add(10*time.Millisecond))
	trs[2].Answered(1, 0, &Nack{Node: "n2", Code: 3, Message: "unknown filter"}, now)

	v := l.Page(PageQuery{}).Changes[0]
	if v.State != StateConverging || v.Sent != 4 || v.Acked != 2 || v.Nacked != 1 || v.Pending != 1 {
		t.Fatalf("view %+v, want converging, 4 sent, 2 ACKed, 1 NACKed, 1 pending", v)
	}
	const wantLine = "ClusterLoadAssignment v42 of 10 resources (cla-0000): 2 ACKed / 1 NACKed (unknown filter) / 1 pending, p50 20.0 ms p99 30.0 ms"
	if v.Line != wantLine {
		t.Errorf("line\n %q\nwant\n %q", v.Line, wantLine)
	}
	c.Announced(now)
	trs[3].End()
	if v := l.Page(PageQuery{}).Changes[0]; v.State != StateNacked || v.Gone != 1 || v.Pending != 0 {
		t.Errorf("after the fan-out and the last stream's end: %+v, want nacked, 1 gone, none pending", v)
	}
	if n := testutil.CollectAndCount(reg, "xds_relay_propagation_seconds"); n == 0 {
		t.Error("no xds_relay_propagation_seconds series")
	}
	lbl := []string{"a.example", "envoy.config.endpoint.v3.ClusterLoadAssignment"}
	if got := testutil.ToFloat64(l.m.nacks.WithLabelValues(lbl...)); got != 1 {
		t.Errorf("xds_relay_propagation_nacks_total = %v, want 1", got)
	}
	if v := l.Page(PageQuery{Detail: true}).Changes[0]; len(v.Buckets) != 2 || len(v.Nackers) != 1 {
		t.Errorf("detail: buckets %+v nackers %+v, want 2 buckets and 1 nacker", v.Buckets, v.Nackers)
	}
}

// Each authority lists its RecentChanges latest changes, newest first;
// an older one retires (its histogram is dropped) but still settles.
func TestLedgerListsTheLatest(t *testing.T) {
	now := time.Unix(1000, 0)
	l, _, _ := newTestLedger(t, &now)
	var first *Change
	for i := range RecentChanges + 5 {
		c := record(l, "a.example", now.Add(time.Duration(i)), 1, "r", "v")
		if i == 0 {
			first = c
		}
	}
	record(l, "b.example", now, 1, "r", "v")
	if n := len(l.Page(PageQuery{Authority: "a.example"}).Changes); n != RecentChanges {
		t.Errorf("a.example lists %d changes, want %d", n, RecentChanges)
	}
	all := l.Page(PageQuery{}).Changes
	if len(all) != RecentChanges+1 || all[0].Arrived.Before(all[1].Arrived) {
		t.Errorf("every authority: %d changes, want %d, newest first", len(all), RecentChanges+1)
	}
	if got := l.Page(PageQuery{Limit: 3, Type: "envoy.config.endpoint.v3.ClusterLoadAssignment"}).Changes; len(got) != 3 {
		t.Errorf("limit 3 by type label: %d changes", len(got))
	}
	if got := l.Page(PageQuery{Type: "other"}).Changes; len(got) != 0 {
		t.Errorf("another type: %d changes, want none", len(got))
	}
	var tr Tracker
	tr.Sent(first, 1, 1, now)
	tr.Answered(1, 0, nil, now.Add(time.Millisecond))
	if n := first.Counts(); n.Acked != 1 || first.lat.Load() != nil {
		t.Errorf("retired change: %+v, histogram %v: want ACKed, no histogram", n, first.lat.Load())
	}
}

// The log loop: one line per change, once, when it converged, settled
// with NACKs, or is overdue (with the streams pending); none for a change
// nobody was sent; a burst is cut at maxLinesPerScan lines.
func TestLedgerLogs(t *testing.T) {
	now := time.Unix(1000, 0)
	l, logs, _ := newTestLedger(t, &now)
	converged := record(l, "a.example", now, 1, "ok", "1")
	nacked := record(l, "a.example", now, 1, "bad", "2")
	slow := record(l, "a.example", now, 1, "slow", "3")
	unsent := record(l, "a.example", now, 1, "nobody", "4")
	var a, b, c Tracker
	a.Sent(converged, 1, 1, now)
	a.Answered(1, 0, nil, now)
	b.Sent(nacked, 1, 1, now)
	b.Answered(1, 0, &Nack{Node: "n", Message: "rejected"}, now)
	c.Sent(slow, 1, 1, now)
	for _, ch := range []*Change{converged, nacked, slow, unsent} {
		ch.Announced(now)
	}
	l.scan(now)
	l.scan(now)
	want := map[string]string{"change converged": "ok", "change settled, NACKed by some clients": "bad"}
	if logs.Len() != len(want) {
		t.Fatalf("%d lines, want %d: %v", logs.Len(), len(want), logs.All())
	}
	for _, e := range logs.TakeAll() {
		if first := e.ContextMap()["first"]; want[e.Message] != first {
			t.Errorf("line %q about %v", e.Message, first)
		}
	}
	now = now.Add(10 * time.Second)
	l.scan(now)
	lines := logs.TakeAll()
	if len(lines) != 1 || lines[0].Message != "change not converged" || lines[0].ContextMap()["pending"] != int64(1) {
		t.Fatalf("overdue: %v, want one 'change not converged' line with 1 pending", lines)
	}

	for range maxLinesPerScan + 3 {
		ch := record(l, "a.example", now, 1, "burst", "5")
		var tr Tracker
		tr.Sent(ch, 1, 1, now)
		tr.Answered(1, 0, nil, now)
		ch.Announced(now)
	}
	l.scan(now)
	lines = logs.TakeAll()
	if len(lines) != maxLinesPerScan+1 || !strings.HasPrefix(lines[maxLinesPerScan].Message, "more changes") {
		t.Errorf("a burst: %d lines, want %d and one summing up the rest", len(lines), maxLinesPerScan+1)
	}
}

// Run scans until its context ends.
func TestLedgerRun(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := New(Options{Logger: zap.New(core), ScanEvery: time.Millisecond})
	c := record(l, "a.example", time.Now(), 1, "r", "v")
	var tr Tracker
	tr.Sent(c, 1, 1, time.Now())
	tr.Answered(1, 0, nil, time.Now())
	c.Announced(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for logs.FilterMessage("change converged").Len() == 0 {
		select {
		case <-deadline:
			t.Fatal("no 'change converged' line")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// The metric series of every configured authority exist from start; a
// removed authority's are deleted.
func TestLedgerSeries(t *testing.T) {
	now := time.Unix(1000, 0)
	l, _, reg := newTestLedger(t, &now)
	before := testutil.CollectAndCount(reg, "xds_relay_propagation_nacks_total")
	if before == 0 {
		t.Fatal("no series at start")
	}
	l.SetAuthorities([]string{"a.example", "b.example"})
	if got := testutil.CollectAndCount(reg, "xds_relay_propagation_nacks_total"); got != 2*before {
		t.Errorf("%d series with two authorities, want %d", got, 2*before)
	}
	l.SetAuthorities([]string{"b.example"})
	if got := testutil.CollectAndCount(reg, "xds_relay_propagation_nacks_total"); got != before {
		t.Errorf("%d series after removing one, want %d", got, before)
	}
	var off *Ledger
	if off.Begin("a", testType, now) != nil || len(off.Page(PageQuery{}).Changes) != 0 || off.Summary().Enabled {
		t.Error("a nil ledger records or lists something")
	}
}
