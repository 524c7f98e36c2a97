package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-relay/xds-relay/internal/loadgen"
)

// TestWriteFairness: the fairness tables and targets, a row per scenario,
// failed ones included, every row as wide as its header.
func TestWriteFairness(t *testing.T) {
	shape := &fairnessShape{Kinds: []string{fairParked, fairChurn}, StallEvery: 100, StallS: 60, ChurnRate: 100, ChurnS: 30, SendTimeoutS: 10}
	r := Results{
		Settings: Settings{Clients: []int{10000}, Variants: []string{"delta"}, Modes: []string{"direct", "relayed"}, Fairness: shape},
		Fairness: []Fairness{
			{Kind: fairParked, Mode: "direct", Variant: "delta", Clients: 10000, Baseline: loadgen.Latency{P99MS: 500}, During: loadgen.Latency{P99MS: 520}, P99Ratio: 1.04,
				UpdatesBaseline: 10, UpdatesDuring: 80, Parked: &ParkedFigures{Stalled: 100, Disconnected: 0, ResponsesMean: 2, ResponsesMax: 2, CatchUpS: 0.4, RelayParked: -1, RelayParks: -1, RelaySlowDisconnects: -1}},
			{Kind: fairParked, Mode: "relayed", Variant: "delta", Clients: 10000, Baseline: loadgen.Latency{P99MS: 300}, During: loadgen.Latency{P99MS: 360}, P99Ratio: 1.2,
				UpdatesBaseline: 10, UpdatesDuring: 90, Parked: &ParkedFigures{Stalled: 100, ResponsesMean: 11.5, ResponsesMax: 13, CatchUpS: 0.2, RelayParked: 100, RelayParks: 100}},
			{Kind: fairChurn, Mode: "direct", Variant: "delta", Clients: 10000, Error: "boom"},
			{Kind: fairChurn, Mode: "relayed", Variant: "delta", Clients: 10000, Baseline: loadgen.Latency{P99MS: 300}, During: loadgen.Latency{P99MS: 310}, P99Ratio: 310.0 / 300,
				UpdatesBaseline: 10, UpdatesDuring: 40, Churn: &ChurnFigures{Client: loadgen.ChurnStats{Rate: 100, Achieved: 61.2, Responses: 900}, RelayThrottled: 1500, RelayChurnPerSec: 50.1}},
		},
	}
	r.Targets = checkTargets(r)
	var b bytes.Buffer
	writeMarkdown(&b, r)
	md := b.String()
	for _, want := range []string{
		"| direct | delta | 10000 | 100 | 10 / 80 | 500.0 | 520.0 | 1.04 | 0 | - | - | 2.0 / 2 | 0.40 |",
		"| relayed | delta | 10000 | 100 | 10 / 90 | 300.0 | 360.0 | 1.20 | 0 | 100 | 0 | 11.5 / 13 | 0.20 |",
		"| direct | delta | 10000 | failed: boom |",
		"| relayed | delta | 10000 | 10 / 40 | 300.0 | 310.0 | 1.03 | 61.2 | 900 | 1500 | 50.1 |",
		"| others' fan-out p99 with 1% of clients stalled ÷ without (delta, N = 10000) | ≤ 1.10 | 1.20 (360.0 / 300.0 ms) | missed |",
		"| stalled clients disconnected (delta, N = 10000) | 0 | 0 of 100 | met |",
		"| others' fan-out p99 with a churning client ÷ without (delta, N = 10000) | ≤ 1.10 | 1.03 (310.0 / 300.0 ms) | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	checkRowWidths(t, md)
	if err := writeChart(filepath.Join(t.TempDir(), "chart.png"), r); err != nil {
		t.Errorf("chart of a run without scenarios: %v", err)
	}
}

func TestFairnessShapeCheck(t *testing.T) {
	good := fairnessShape{Kinds: []string{fairParked}, StallEvery: 100, StallS: 1, ChurnRate: 1, ChurnS: 1, SendTimeoutS: 1}
	if err := good.check(); err != nil {
		t.Errorf("good shape: %v", err)
	}
	if err := (*fairnessShape)(nil).check(); err != nil {
		t.Errorf("none: %v", err)
	}
	for name, edit := range map[string]func(*fairnessShape){
		"unknown kind": func(s *fairnessShape) { s.Kinds = []string{"slow"} },
		"stall every":  func(s *fairnessShape) { s.StallEvery = 1 },
		"no stall":     func(s *fairnessShape) { s.StallS = 0 },
		"no churn":     func(s *fairnessShape) { s.ChurnRate = 0 },
	} {
		s := good
		edit(&s)
		if err := s.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestScenarioFairness runs both fairness scenarios, relayed, at N = 20
// with short phases (about 12 s, builds included: the phases are the test): the stalled
// clients are parked by the relay, none disconnected, and each catches up
// with the newest update; the churning client sends and is answered.
func TestScenarioFairness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the relay and the origin")
	}
	e := buildEnv(t)
	e.resourceSize = 4096
	// Responses of 40 KiB: the stalled clients' 64 KiB windows and gRPC's
	// write quota are full after a few updates, and a send waits 0.5 s.
	shape := fairnessShape{StallEvery: 10, StallS: 3, ChurnRate: 100, ChurnS: 1, SendTimeoutS: 0.5}
	if raceEnabled {
		// Under make test the relay, the origin and the load generator are
		// built with -race too (from the tests' build cache), and each
		// update takes longer: a longer stall leaves room for the updates
		// that fill the stalled clients' windows.
		shape.StallS = 8
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	f := e.runFairness(ctx, shape, Fairness{Kind: fairParked, Mode: "relayed", Variant: "delta", Clients: 20})
	if f.Error != "" || f.Parked == nil {
		t.Fatalf("parked: %s", f.Error)
	}
	if p := f.Parked; p.Stalled != 2 || p.Disconnected != 0 || p.RelayParks < 1 || p.RelaySlowDisconnects != 0 || p.ResponsesMax < 1 {
		t.Errorf("parked figures %+v: want 2 stalled, parked by the relay, none disconnected, each sent the newest", *p)
	}
	if f.Baseline.Samples != 2*18*10 || f.During.Samples == 0 || f.UpdatesDuring == 0 {
		t.Errorf("others' samples %d over the baseline (want 2 updates × 18 clients × 10), %d over %d updates of the stall",
			f.Baseline.Samples, f.During.Samples, f.UpdatesDuring)
	}

	f = e.runFairness(ctx, shape, Fairness{Kind: fairChurn, Mode: "relayed", Variant: "delta", Clients: 20})
	if f.Error != "" || f.Churn == nil {
		t.Fatalf("churn: %s", f.Error)
	}
	if c := f.Churn; c.Client.Requests < 10 || c.Client.Responses < 1 || c.Client.Error != "" || c.RelayChurnPerSec <= 0 {
		t.Errorf("churn figures %+v", *c)
	}
}
