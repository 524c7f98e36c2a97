package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Target is one of the benchmark's targets, checked against a run's
// figures. The benchmark measures; nothing fails because a target is missed.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // met | missed | not measured
}

// The targets are stated at targetClients clients; those about one variant
// are about targetVariant.
const (
	targetClients = 10000
	targetVariant = "delta"
)

// targetN is the N the run's targets are checked at: targetClients when
// the run measured it, else the largest N it measured (50000 for
// `make bench-50k`, 1000 for a quick pass).
func targetN(r Results) int {
	n := 0
	for _, c := range r.Settings.Clients {
		if c == targetClients {
			return c
		}
		n = max(n, c)
	}
	return n
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// checkTargets compares the run, at targetN, with the targets: the relay
// against go-control-plane direct in the same run, and one response per
// client per origin change.
func checkTargets(r Results) []Target {
	n := targetN(r)
	// find returns the scenario of workload case c (a workload and, for
	// envoy, its names), measured at n without error.
	findCase := func(mode, variant string, c workloadCase) *Scenario {
		for i, s := range r.Scenarios {
			if s.Mode == mode && s.Variant == variant && s.Workload == c.workload && s.Clients == n && s.Error == "" &&
				(c.workload != workloadEnvoy || s.Names == c.names) {
				return &r.Scenarios[i]
			}
		}
		return nil
	}
	find := func(mode, variant, workload string) *Scenario {
		return findCase(mode, variant, workloadCase{workload, namesXDSTP})
	}
	cases := workloadCases(r.Settings)
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

	// Fan-out latency and the serving process's CPU, relayed against direct.
	for _, c := range cases {
		for _, v := range r.Settings.Variants {
			d, rl := findCase("direct", v, c), findCase("relayed", v, c)
			name := fmt.Sprintf("fan-out p99, relayed ÷ direct (%s, %s)", c, v)
			if d == nil || rl == nil || d.FanoutP99MS <= 0 {
				add(name, "≤ 0.5", false, "", false)
				continue
			}
			ratio := rl.FanoutP99MS / d.FanoutP99MS
			add(name, "≤ 0.5", true, fmt.Sprintf("%.2f (%.1f / %.1f ms)", ratio, rl.FanoutP99MS, d.FanoutP99MS), ratio <= 0.5)
		}
	}
	for _, c := range cases {
		d, rl := findCase("direct", targetVariant, c), findCase("relayed", targetVariant, c)
		name := fmt.Sprintf("serving CPU per update, relayed ÷ direct (%s, %s)", c, targetVariant)
		if d == nil || rl == nil || d.ServingCPUSPerUpdate <= 0 {
			add(name, "≤ 0.5", false, "", false)
			continue
		}
		ratio := rl.ServingCPUSPerUpdate / d.ServingCPUSPerUpdate
		add(name, "≤ 0.5", true, fmt.Sprintf("%.2f (%.4f / %.4f s)", ratio, rl.ServingCPUSPerUpdate, d.ServingCPUSPerUpdate), ratio <= 0.5)
	}

	// One origin change, one response per client.
	for _, w := range r.Settings.Workloads {
		if w == workloadEnvoy {
			continue // per affected client, below
		}
		for _, v := range r.Settings.Variants {
			rl := find("relayed", v, w)
			name := fmt.Sprintf("responses per client per update, relayed (%s, %s)", w, v)
			if rl == nil {
				add(name, "exactly 1.00", false, "", false)
				continue
			}
			add(name, "exactly 1.00", true, perUpdateText(rl.ClientResponsesPerUpdate), rl.ClientResponsesPerUpdate == 1)
		}
	}

	// Envoy-shaped: per affected client one response holding just what
	// changed in its window; nothing for the others; a cold initial sync in
	// one response per client, no slower than direct.
	for _, c := range cases {
		if c.workload != workloadEnvoy {
			continue
		}
		for _, v := range r.Settings.Variants {
			rl := findCase("relayed", v, c)
			ok := rl != nil && rl.Envoy != nil && rl.Envoy.Tally.Affected > 0
			name := fmt.Sprintf("responses per affected client per update, relayed (%s, %s)", c, v)
			if !ok {
				add(name, "exactly 1.00", false, "", false)
				add(fmt.Sprintf("resources per affected client per update, relayed (%s, %s)", c, v), "= changed names in its window", false, "", false)
				add(fmt.Sprintf("responses to unaffected clients, relayed (%s, %s)", c, v), "0", false, "", false)
			} else {
				e := rl.Envoy
				add(name, "exactly 1.00", true, perUpdateText(e.ResponsesPerAffected), e.Tally.AffectedResponses == int64(e.Tally.Affected))
				add(fmt.Sprintf("resources per affected client per update, relayed (%s, %s)", c, v), "= changed names in its window", true,
					fmt.Sprintf("%.3f vs %.3f", e.ResourcesPerAffected, e.ChangedInWindowPerAffected), e.Tally.AffectedResources == e.Tally.ChangedInWindows)
				add(fmt.Sprintf("responses to unaffected clients, relayed (%s, %s)", c, v), "0", true,
					fmt.Sprintf("%d over %d client-updates", e.UnaffectedResponses, e.Tally.Unaffected), e.UnaffectedResponses == 0)
			}
			name = fmt.Sprintf("cold initial sync: responses per client, relayed (%s, %s)", c, v)
			if rl == nil {
				add(name, "exactly 1.00", false, "", false)
			} else {
				add(name, "exactly 1.00", true, fmt.Sprintf("%s (max %d)", perUpdateText(rl.InitialResponsesPerClient), rl.InitialMaxResponses),
					rl.InitialResponsesPerClient == 1 && rl.InitialMaxResponses == 1)
			}
		}
		d, rl := findCase("direct", targetVariant, c), findCase("relayed", targetVariant, c)
		name := fmt.Sprintf("cold initial sync, relayed vs direct (%s, %s)", c, targetVariant)
		if d == nil || rl == nil {
			add(name, "relayed ≤ direct", false, "", false)
		} else {
			add(name, "relayed ≤ direct", true, fmt.Sprintf("%.2f s vs %.2f s", rl.InitialSyncS, d.InitialSyncS), rl.InitialSyncS <= d.InitialSyncS)
		}
	}

	// Idle memory and initial sync come before any update: the first
	// workload with both modes speaks for all.
	var idleD, idleR *Scenario
	for _, w := range r.Settings.Workloads {
		if idleD, idleR = find("direct", targetVariant, w), find("relayed", targetVariant, w); idleR != nil && idleD != nil {
			break
		}
	}
	name := fmt.Sprintf("relay memory per idle client stream (%s)", targetVariant)
	if idleR != nil {
		add(name, "≤ 24 KiB", true, fmt.Sprintf("%.1f KiB", idleR.RSSPerStreamKiB), idleR.RSSPerStreamKiB <= 24)
	} else {
		add(name, "≤ 24 KiB", false, "", false)
	}
	name = fmt.Sprintf("initial sync, relayed vs direct (%s)", targetVariant)
	if idleR != nil && idleD != nil {
		add(name, "relayed ≤ direct", true, fmt.Sprintf("%.2f s vs %.2f s", idleR.InitialSyncS, idleD.InitialSyncS), idleR.InitialSyncS <= idleD.InitialSyncS)
	} else {
		add(name, "relayed ≤ direct", false, "", false)
	}
	for _, c := range cases {
		rl := findCase("relayed", targetVariant, c)
		name := fmt.Sprintf("reconnect storm: extra origin requests (%s, %s)", c, targetVariant)
		if rl == nil {
			add(name, "0", false, "", false)
			continue
		}
		add(name, "0", true, fmt.Sprint(rl.StormOriginRequests), rl.StormOriginRequests == 0)
	}

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

// workloadCase is a workload with the names it runs with.
type workloadCase struct{ workload, names string }

func (c workloadCase) String() string { return label(c.workload, c.names) }

// workloadCases lists the run's workloads, envoy once per names scheme.
func workloadCases(s Settings) []workloadCase {
	var out []workloadCase
	for _, w := range s.Workloads {
		for _, names := range schemesFor(w, s.NameSchemes) {
			out = append(out, workloadCase{w, names})
		}
	}
	return out
}

// writeTargets writes the targets, checked at n clients.
func writeTargets(w io.Writer, n int, ts []Target) {
	at := fmt.Sprintf("N = %d", n)
	if n != targetClients {
		at += fmt.Sprintf("; they are stated at N = %d, which this run did not measure", targetClients)
	}
	fmt.Fprintf(w, "\nTargets (%s; relayed against direct go-control-plane in the same run):\n\n", at)
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
