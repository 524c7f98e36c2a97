package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestModeBareTurnsDefaultsOff: mode bare runs the relay with the
// propagation ledger and safe delivery off, whatever the flags say;
// relayed runs what they say.
func TestModeBareTurnsDefaultsOff(t *testing.T) {
	e := &env{}
	if got := e.featuresOff(modeBare); got != (featuresOff{ledger: true, delivery: true}) {
		t.Errorf("bare: %+v, want both off", got)
	}
	if got := e.featuresOff(modeRelayed); got != (featuresOff{}) {
		t.Errorf("relayed at the defaults: %+v, want none off", got)
	}
	e.ledgerOff = true
	if got := e.featuresOff(modeRelayed); got != (featuresOff{ledger: true}) {
		t.Errorf("relayed with --propagation=false: %+v", got)
	}
	if !relayedMode(modeBare) || !relayedMode(modeRelayed) || relayedMode(modeDirect) {
		t.Error("relayedMode: bare and relayed talk to a relay, direct does not")
	}
}

// TestDefaultsCostTable: a scenario run relayed and bare gets one row,
// relayed ÷ bare; one run only relayed gets none.
func TestDefaultsCostTable(t *testing.T) {
	s := func(mode, workload string, cpu, p99, rss float64) Scenario {
		return Scenario{Mode: mode, Variant: "delta", Workload: workload, Names: "xdstp", Clients: 10000,
			ServingCPUSPerUpdate: cpu, FanoutP99MS: p99, RSSPerStreamKiB: rss}
	}
	r := Results{Scenarios: []Scenario{
		s(modeDirect, workloadAll, 1, 500, 40),
		s(modeRelayed, workloadAll, 0.42, 300, 30.5),
		s(modeBare, workloadAll, 0.40, 290, 30),
		s(modeRelayed, workloadOne, 0.1, 100, 29),
	}}
	var b bytes.Buffer
	writeDefaultsCost(&b, r)
	out := b.String()
	if !strings.Contains(out, "| delta | all | 10000 | 0.420 | 0.400 | 1.05 | 300.0 | 290.0 | 1.03 | 30.5 | 30.0 | +0.5 |") {
		t.Errorf("no row of workload all relayed against bare:\n%s", out)
	}
	if strings.Contains(out, "| delta | one |") {
		t.Errorf("a row for workload one, which ran relayed only:\n%s", out)
	}
	b.Reset()
	writeDefaultsCost(&b, Results{Scenarios: r.Scenarios[:2]})
	if b.Len() != 0 {
		t.Errorf("a table without a bare scenario:\n%s", b.String())
	}
}
