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
	c := &targetCheck{r: r, n: targetN(r), cases: workloadCases(r.Settings)}
	c.relayedOverDirect()
	c.responsesPerUpdate()
	for _, wc := range c.cases {
		if wc.workload == workloadEnvoy {
			c.envoy(wc)
		}
	}
	c.idle()
	c.storm()
	c.fanoutAllocs()
	c.envelopeAllocs()
	c.ledgerAgreement() // ledger.go
	return c.ts
}

// targetCheck is one run being checked against the targets, which it
// collects in order.
type targetCheck struct {
	r     Results
	n     int            // the N the targets are checked at
	cases []workloadCase // the run's workloads, envoy once per names scheme
	ts    []Target
}

// findCase returns the scenario of workload case wc (a workload and, for
// envoy, its names), measured at n without error.
func (c *targetCheck) findCase(mode, variant string, wc workloadCase) *Scenario {
	for i, s := range c.r.Scenarios {
		if s.Mode == mode && s.Variant == variant && s.Workload == wc.workload && s.Clients == c.n && s.Error == "" &&
			(wc.workload != workloadEnvoy || s.Names == wc.names) {
			return &c.r.Scenarios[i]
		}
	}
	return nil
}

// find returns the scenario of workload, with xdstp names for envoy.
func (c *targetCheck) find(mode, variant, workload string) *Scenario {
	return c.findCase(mode, variant, workloadCase{workload, namesXDSTP})
}

// add records a target: got and whether it is met when measured, else
// "not measured".
func (c *targetCheck) add(name, want string, measured bool, got string, ok bool) {
	t := Target{Name: name, Want: want, Got: got, Status: "not measured"}
	if measured {
		t.Status = status(ok)
	} else {
		t.Got = "-"
	}
	c.ts = append(c.ts, t)
}

// ratioTargets are the figures relayed must halve against direct: fan-out
// latency in every variant, the serving process's CPU in targetVariant.
var ratioTargets = []struct {
	name       string // %s workload case, %s variant
	allVariant bool   // every variant, else targetVariant only
	figure     func(*Scenario) float64
	got        string // ratio, relayed, direct
}{
	{"fan-out p99, relayed ÷ direct (%s, %s)", true, func(s *Scenario) float64 { return s.FanoutP99MS }, "%.2f (%.1f / %.1f ms)"},
	{"serving CPU per update, relayed ÷ direct (%s, %s)", false, func(s *Scenario) float64 { return s.ServingCPUSPerUpdate }, "%.2f (%.4f / %.4f s)"},
}

// relayedOverDirect checks the ratioTargets, per workload case and variant.
func (c *targetCheck) relayedOverDirect() {
	for _, t := range ratioTargets {
		for _, wc := range c.cases {
			variants := []string{targetVariant}
			if t.allVariant {
				variants = c.r.Settings.Variants
			}
			for _, v := range variants {
				d, rl := c.findCase("direct", v, wc), c.findCase("relayed", v, wc)
				name := fmt.Sprintf(t.name, wc, v)
				if d == nil || rl == nil || t.figure(d) <= 0 {
					c.add(name, "≤ 0.5", false, "", false)
					continue
				}
				ratio := t.figure(rl) / t.figure(d)
				c.add(name, "≤ 0.5", true, fmt.Sprintf(t.got, ratio, t.figure(rl), t.figure(d)), ratio <= 0.5)
			}
		}
	}
}

// responsesPerUpdate checks one response per client per origin change
// (workloads one and all; envoy is per affected client).
func (c *targetCheck) responsesPerUpdate() {
	for _, w := range c.r.Settings.Workloads {
		if w == workloadEnvoy {
			continue // per affected client, in envoy
		}
		for _, v := range c.r.Settings.Variants {
			rl := c.find("relayed", v, w)
			name := fmt.Sprintf("responses per client per update, relayed (%s, %s)", w, v)
			if rl == nil {
				c.add(name, "exactly 1.00", false, "", false)
				continue
			}
			c.add(name, "exactly 1.00", true, perUpdateText(rl.ClientResponsesPerUpdate), rl.ClientResponsesPerUpdate == 1)
		}
	}
}

// envoy checks the envoy-shaped workload case wc: per affected client one
// response holding just what changed in its window; nothing for the
// others; a cold initial sync in one response per client, no slower than
// direct.
func (c *targetCheck) envoy(wc workloadCase) {
	for _, v := range c.r.Settings.Variants {
		rl := c.findCase("relayed", v, wc)
		c.envoyUpdates(wc, v, rl)
		name := fmt.Sprintf("cold initial sync: responses per client, relayed (%s, %s)", wc, v)
		if rl == nil {
			c.add(name, "exactly 1.00", false, "", false)
		} else {
			c.add(name, "exactly 1.00", true, fmt.Sprintf("%s (max %d)", perUpdateText(rl.InitialResponsesPerClient), rl.InitialMaxResponses),
				rl.InitialResponsesPerClient == 1 && rl.InitialMaxResponses == 1)
		}
	}
	d, rl := c.findCase("direct", targetVariant, wc), c.findCase("relayed", targetVariant, wc)
	name := fmt.Sprintf("cold initial sync, relayed vs direct (%s, %s)", wc, targetVariant)
	if d == nil || rl == nil {
		c.add(name, "relayed ≤ direct", false, "", false)
	} else {
		c.add(name, "relayed ≤ direct", true, fmt.Sprintf("%.2f s vs %.2f s", rl.InitialSyncS, d.InitialSyncS), rl.InitialSyncS <= d.InitialSyncS)
	}
}

// envoyUpdates checks what the updates did to affected and unaffected
// clients of rl, relayed scenario of workload case wc and variant v.
func (c *targetCheck) envoyUpdates(wc workloadCase, v string, rl *Scenario) {
	responses := fmt.Sprintf("responses per affected client per update, relayed (%s, %s)", wc, v)
	resources := fmt.Sprintf("resources per affected client per update, relayed (%s, %s)", wc, v)
	unaffected := fmt.Sprintf("responses to unaffected clients, relayed (%s, %s)", wc, v)
	if rl == nil || rl.Envoy == nil || rl.Envoy.Tally.Affected <= 0 {
		c.add(responses, "exactly 1.00", false, "", false)
		c.add(resources, "= changed names in its window", false, "", false)
		c.add(unaffected, "0", false, "", false)
		return
	}
	e := rl.Envoy
	c.add(responses, "exactly 1.00", true, perUpdateText(e.ResponsesPerAffected), e.Tally.AffectedResponses == int64(e.Tally.Affected))
	c.add(resources, "= changed names in its window", true,
		fmt.Sprintf("%.3f vs %.3f", e.ResourcesPerAffected, e.ChangedInWindowPerAffected), e.Tally.AffectedResources == e.Tally.ChangedInWindows)
	c.add(unaffected, "0", true,
		fmt.Sprintf("%d over %d client-updates", e.UnaffectedResponses, e.Tally.Unaffected), e.UnaffectedResponses == 0)
}

// idle checks idle memory and initial sync, which come before any update:
// the first workload with both modes speaks for all.
func (c *targetCheck) idle() {
	var idleD, idleR *Scenario
	for _, w := range c.r.Settings.Workloads {
		if idleD, idleR = c.find("direct", targetVariant, w), c.find("relayed", targetVariant, w); idleR != nil && idleD != nil {
			break
		}
	}
	name := fmt.Sprintf("relay memory per idle client stream (%s)", targetVariant)
	if idleR != nil {
		c.add(name, "≤ 24 KiB", true, fmt.Sprintf("%.1f KiB", idleR.RSSPerStreamKiB), idleR.RSSPerStreamKiB <= 24)
	} else {
		c.add(name, "≤ 24 KiB", false, "", false)
	}
	name = fmt.Sprintf("initial sync, relayed vs direct (%s)", targetVariant)
	if idleR != nil && idleD != nil {
		c.add(name, "relayed ≤ direct", true, fmt.Sprintf("%.2f s vs %.2f s", idleR.InitialSyncS, idleD.InitialSyncS), idleR.InitialSyncS <= idleD.InitialSyncS)
	} else {
		c.add(name, "relayed ≤ direct", false, "", false)
	}
}

// storm checks that a reconnect storm costs the origin nothing.
func (c *targetCheck) storm() {
	for _, wc := range c.cases {
		rl := c.findCase("relayed", targetVariant, wc)
		name := fmt.Sprintf("reconnect storm: extra origin requests (%s, %s)", wc, targetVariant)
		if rl == nil {
			c.add(name, "0", false, "", false)
			continue
		}
		c.add(name, "0", true, fmt.Sprint(rl.StormOriginRequests), rl.StormOriginRequests == 0)
	}
}

// fanoutAllocs checks allocations per watcher per update: constant across
// resource sizes.
func (c *targetCheck) fanoutAllocs() {
	const name, want = "cache fan-out allocations per watcher per update", "small constant, independent of size"
	var per []float64
	var got []string
	for _, m := range c.r.Micro {
		if strings.HasPrefix(m.Name, "BenchmarkFanoutResourceSize/") {
			if v, ok := m.Extra["allocs/watcher"]; ok {
				per = append(per, v)
				got = append(got, fmt.Sprintf("%.3g", v))
			}
		}
	}
	if len(per) < 2 {
		c.add(name, want, false, "", false)
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range per {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	// "Small constant": at most a few allocations per watcher, and the
	// same (within 10% or 0.05) at 1 KiB and 64 KiB.
	ok := hi <= 4 && hi-lo <= math.Max(0.05, 0.1*hi)
	c.add(name, want, true, strings.Join(got, " / ")+" (1 KiB / 64 KiB)", ok)
}

// envelopeAllocs checks the per-client part of fan-out: the downstream
// response envelope.
func (c *targetCheck) envelopeAllocs() {
	const name, want = "downstream envelope allocations per client per update", "small constant, independent of size"
	env := map[string][]float64{}
	var envGot []string
	for _, m := range c.r.Micro {
		if v, ok := strings.CutPrefix(m.Name, "BenchmarkEnvelope/variant="); ok {
			variant, _, _ := strings.Cut(v, "/")
			env[variant] = append(env[variant], m.AllocsPerOp)
			envGot = append(envGot, fmt.Sprintf("%s %.0f", trimProcs(v), m.AllocsPerOp))
		}
	}
	if len(env) == 0 {
		c.add(name, want, false, "", false)
		return
	}
	ok := true
	for _, as := range env {
		for _, a := range as {
			ok = ok && a == as[0] && a <= 8
		}
	}
	c.add(name, want, true, strings.Join(envGot, "; "), ok)
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
