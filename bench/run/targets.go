package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Target is one of issue #6's targets, checked against a run's figures.
// The benchmark measures; nothing fails because a target is missed.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // met | missed | not measured
}

// targetClients and targetVariant select the scenarios the targets are
// about: 10000 delta clients on one resource set.
const (
	targetClients = 10000
	targetVariant = "delta"
)

func findScenario(r Results, mode string) *Scenario {
	for i, s := range r.Scenarios {
		if s.Mode == mode && s.Variant == targetVariant && s.Clients == targetClients && s.Error == "" {
			return &r.Scenarios[i]
		}
	}
	return nil
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// checkTargets compares the run with issue #6's targets.
func checkTargets(r Results) []Target {
	direct, relayed := findScenario(r, "direct"), findScenario(r, "relayed")
	var ts []Target
	add := func(name, want string, measured bool, got string, ok bool) {
		t := Target{Name: name, Want: want, Got: got, Status: "not measured"}
		if measured {
			t.Status = status(ok)
		} else {
			t.Got = "-"
		}
		ts = append(ts, t)
	}
	rel := relayed != nil
	var s Scenario
	if rel {
		s = *relayed
	}
	add("origin streams (relayed)", "1", rel, fmt.Sprint(s.OriginStreams), s.OriginStreams == 1)
	add("origin subscriptions (relayed)", fmt.Sprintf("%d (1 per resource)", r.Settings.Resources), rel,
		fmt.Sprint(s.OriginSubscriptions), s.OriginSubscriptions == r.Settings.Resources)
	add("fan-out p99 of one update", "≤ 250 ms", rel, fmt.Sprintf("%.1f ms", s.FanoutP99MS), s.FanoutP99MS <= 250)
	if rel && direct != nil {
		ratio := s.FanoutP99MS / direct.FanoutP99MS
		add("fan-out p99 vs direct go-control-plane", "≤ 0.7×", true,
			fmt.Sprintf("%.2f× (%.1f / %.1f ms)", ratio, s.FanoutP99MS, direct.FanoutP99MS), ratio <= 0.7)
	} else {
		add("fan-out p99 vs direct go-control-plane", "≤ 0.7×", false, "", false)
	}
	add("relay memory per idle client stream", "≤ 32 KiB", rel, fmt.Sprintf("%.1f KiB", s.RSSPerStreamKiB), s.RSSPerStreamKiB <= 32)
	add("reconnect storm: extra origin requests", "0", rel, fmt.Sprint(s.StormOriginRequests), s.StormOriginRequests == 0)
	add("reconnect storm: all clients served again", "≤ 5 s", rel, fmt.Sprintf("%.2f s", s.StormS), s.StormCompleted && s.StormS <= 5)

	// Allocations per watcher per update: constant across resource sizes.
	var per []float64
	var got []string
	for _, m := range r.Micro {
		if strings.HasPrefix(m.Name, "BenchmarkFanoutResourceSize/") {
			if v, ok := m.Extra["allocs/watcher"]; ok {
				per = append(per, v)
				got = append(got, fmt.Sprintf("%.3g", v))
			}
		}
	}
	if len(per) >= 2 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range per {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		// "Small constant": at most a few allocations per watcher, and the
		// same (within 10% or 0.05) at 1 KiB and 64 KiB.
		ok := hi <= 4 && hi-lo <= math.Max(0.05, 0.1*hi)
		add("cache fan-out allocations per watcher per update", "small constant, independent of size", true,
			strings.Join(got, " / ")+" (1 KiB / 64 KiB)", ok)
	} else {
		add("cache fan-out allocations per watcher per update", "small constant, independent of size", false, "", false)
	}

	// The per-client part of fan-out: the downstream response envelope.
	env := map[string][]float64{}
	var envGot []string
	for _, m := range r.Micro {
		if v, ok := strings.CutPrefix(m.Name, "BenchmarkEnvelope/variant="); ok {
			variant, _, _ := strings.Cut(v, "/")
			env[variant] = append(env[variant], m.AllocsPerOp)
			envGot = append(envGot, fmt.Sprintf("%s %.0f", trimProcs(v), m.AllocsPerOp))
		}
	}
	if len(env) > 0 {
		ok := true
		for _, as := range env {
			for _, a := range as {
				ok = ok && a == as[0] && a <= 8
			}
		}
		add("downstream envelope allocations per client per update", "small constant, independent of size", true,
			strings.Join(envGot, "; "), ok)
	} else {
		add("downstream envelope allocations per client per update", "small constant, independent of size", false, "", false)
	}
	return ts
}

func writeTargets(w io.Writer, ts []Target) {
	fmt.Fprintf(w, "\nTargets (issue #6; %d %s clients, one resource set):\n\n", targetClients, targetVariant)
	fmt.Fprintln(w, "| target | want | got | status |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, t.Status)
	}
}

// trimProcs drops the "-GOMAXPROCS" suffix of a benchmark name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}
