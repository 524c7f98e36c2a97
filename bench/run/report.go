package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	MemTotal string `json:"mem_total"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

// Results is everything one `make bench` run wrote.
type Results struct {
	Started   string     `json:"started"`
	Finished  string     `json:"finished"`
	Machine   Machine    `json:"machine"`
	Settings  Settings   `json:"settings"`
	Scenarios []Scenario `json:"scenarios"`
	Micro     []Micro    `json:"micro"`
	MicroErr  string     `json:"micro_error,omitempty"`
	Targets   []Target   `json:"targets"`
	// Fairness are the fairness scenarios (--fairness; fairness.go).
	Fairness []Fairness `json:"fairness,omitempty"`
}

// Settings are the workload knobs of the run.
type Settings struct {
	Clients       []int    `json:"clients"`
	Variants      []string `json:"variants"`
	Modes         []string `json:"modes"`
	Workloads     []string `json:"workloads"`
	Resources     int      `json:"resources"`
	ResourceBytes int      `json:"resource_bytes"`
	Updates       int      `json:"updates"`
	// Envoy and NameSchemes are workload envoy's shape and names.
	Envoy       envoyShape `json:"envoy"`
	NameSchemes []string   `json:"name_schemes"`
	// Pin is where each process ran (--pin); nil when the scheduler
	// placed them.
	Pin *Pinning `json:"pin,omitempty"`
	// LedgerOff: the relay ran without its propagation ledger
	// (--propagation=false).
	LedgerOff bool `json:"ledger_off,omitempty"`
	// Fairness is what the fairness scenarios do; nil when none runs.
	Fairness *fairnessShape `json:"fairness,omitempty"`
	// DeliveryOff: the relay ran with safe delivery off (--delivery=false).
	DeliveryOff bool `json:"delivery_off,omitempty"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// writeMarkdown writes the scenario and micro-benchmark tables.
func writeMarkdown(w io.Writer, r Results) {
	writeSetting(w, r)
	writeScenarios(w, r)
	writeMemory(w, r)
	writeEnvoy(w, r)
	writeInitialSync(w, r)
	writeLedger(w, r)       // ledger.go
	writeDefaultsCost(w, r) // defaults.go
	writeFairness(w, r)
	writeTargets(w, targetN(r), r.Targets)
	writeMicro(w, r)
}

// writeSetting writes the machine and the workloads the run measured.
func writeSetting(w io.Writer, r Results) {
	fmt.Fprintf(w, "Machine: %d CPUs, %s, %s RAM, Linux %s, %s. N clients over N/100 connections; %d updates per scenario.",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemTotal, r.Machine.Kernel, r.Machine.Go, r.Settings.Updates)
	if p := r.Settings.Pin; p != nil {
		fmt.Fprintf(w, " Pinned (%s): origin on CPU %s, relay (relayed) on CPU %s, load generator on CPU %s; each Go process's GOMAXPROCS is the number of CPUs it is pinned to.",
			p.Via, p.Origin, p.Relay, p.Loadgen)
	}
	if slices.Contains(r.Settings.Workloads, workloadOne) || slices.Contains(r.Settings.Workloads, workloadAll) {
		fmt.Fprintf(w, " Workloads one and all: %d ClusterLoadAssignments of ~%d B, every client subscribes to all; each update changes one resource (workload one) or all %d in one origin change (workload all).",
			r.Settings.Resources, r.Settings.ResourceBytes, r.Settings.Resources)
	}
	if r.Settings.LedgerOff {
		fmt.Fprint(w, " The relay ran without its propagation ledger (propagation.enabled: false).")
	}
	if r.Settings.DeliveryOff {
		fmt.Fprint(w, " The relay ran with safe delivery off (delivery.validate: false, nack_breaker.clients: 0, deletion_guard.max_removed_share: 1).")
	}
	fmt.Fprint(w, "\n\n")
	if slices.Contains(r.Settings.Workloads, workloadEnvoy) {
		e := r.Settings.Envoy
		fmt.Fprintf(w, "Workload envoy (at the largest N): %d ClusterLoadAssignments of ~%d B, named xdstp (envoy xdstp) or plain (envoy plain, through the relay's plain-names authority; clients in %d node cluster(s)); client i subscribes to its own window of %d names from name i×stride (stride R/N, at least 1), overlapping its neighbours'; each update changes %d of them, a seeded random set, in one origin change.\n\n",
			e.Resources, r.Settings.ResourceBytes, e.NodeClusters, e.Window, e.Changed)
	}
}

// writeScenarios writes the main table, one row per scenario.
func writeScenarios(w io.Writer, r Results) {
	fmt.Fprintln(w, "| mode | variant | workload | N | origin streams | origin subs | origin B/update | responses/client/update | resources/client/update | bytes/client/update | fan-out p50 ms | p99 ms | max ms | serving CPU s/update | origin CPU s/update | loadgen CPU s/update | other load, cores | RSS KiB/stream | storm s | storm origin reqs | initial sync s |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Scenarios {
		if s.Error != "" {
			fmt.Fprintf(w, "| %s | %s | %s | %d | failed: %s |||||||||||||||||\n", s.Mode, s.Variant, label(s.Workload, s.Names), s.Clients, mdEscape(s.Error))
			continue
		}
		storm := fmt.Sprintf("%.2f", s.StormS)
		if !s.StormCompleted {
			storm += " (incomplete)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %.0f | %s | %.2f | %.0f | %.1f | %.1f | %.1f | %.4f | %.4f | %.4f | %.2f | %.1f | %s | %d | %.2f |\n",
			s.Mode, s.Variant, label(s.Workload, s.Names), s.Clients, s.OriginStreams, s.OriginSubscriptions, s.OriginBytesPerUpdate,
			perUpdateText(s.ClientResponsesPerUpdate), s.ClientResourcesPerUpdate, s.ClientBytesPerUpdate,
			s.FanoutP50MS, s.FanoutP99MS, s.FanoutMaxMS, s.ServingCPUSPerUpdate, s.OriginCPUSPerUpdate, s.LoadgenCPUSPerUpdate, s.OtherCores,
			s.RSSPerStreamKiB, storm, s.StormOriginRequests, s.InitialSyncS)
	}
}

// writeMemory writes the serving process's memory at idle, and where it
// goes by its Go runtime.
func writeMemory(w io.Writer, r Results) {
	fmt.Fprintln(w, "\nServing process memory at idle, before the clients connected and after all synced (RSS from /proc; heap, stacks and goroutines from its /metrics: go_memstats_heap_inuse_bytes, go_memstats_stack_inuse_bytes, go_goroutines, read right after RSS; rest = RSS − heap − stacks: heap freed but not returned to the OS, the runtime's own, non-Go; per stream = (after − before) / N); storm peak: its largest RSS during the reconnect storm (VmHWM, reset just before it), ÷ RSS after the first sync:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | variant | workload | N | RSS before MiB | RSS after MiB | RSS KiB/stream | heap KiB/stream | stacks KiB/stream | rest KiB/stream | goroutines/stream | storm peak RSS MiB | ÷ after |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Scenarios {
		if s.Error != "" {
			continue
		}
		peak, ratio := "-", "-"
		if s.StormPeakRSSKiB > 0 && s.ServingRSSAfterKiB > 0 {
			peak = strconv.FormatFloat(s.StormPeakRSSKiB/1024, 'f', 1, 64)
			ratio = strconv.FormatFloat(s.StormPeakRSSKiB/s.ServingRSSAfterKiB, 'f', 2, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %s | %s |\n", s.Mode, s.Variant, label(s.Workload, s.Names), s.Clients,
			s.ServingRSSBeforeKiB/1024, s.ServingRSSAfterKiB/1024, s.RSSPerStreamKiB,
			s.HeapPerStreamKiB, s.StacksPerStreamKiB, s.RestPerStreamKiB, s.GoroutinesPerStream, peak, ratio)
	}
}

// writeMicro writes the micro-benchmarks, if the run has any or they
// failed.
func writeMicro(w io.Writer, r Results) {
	if len(r.Micro) == 0 && r.MicroErr == "" {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| package | benchmark | ns/op | B/op | allocs/op | other |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|")
	for _, m := range r.Micro {
		var extra []string
		keys := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			extra = append(extra, fmt.Sprintf("%.4g %s", m.Extra[k], k))
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %.0f | %s |\n", strings.TrimPrefix(m.Package, "github.com/xds-relay/xds-relay/"),
			m.Name, m.NsPerOp, m.BytesPerOp, m.AllocsPerOp, strings.Join(extra, ", "))
	}
	if r.MicroErr != "" {
		fmt.Fprintf(w, "\nMicro-benchmarks failed: %s\n", mdEscape(r.MicroErr))
	}
}

// writeEnvoy writes what the updates of workload envoy did per affected
// client, and to the unaffected ones.
func writeEnvoy(w io.Writer, r Results) {
	var rows []Scenario
	for _, s := range r.Scenarios {
		if s.Workload == workloadEnvoy && s.Error == "" && s.Envoy != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWorkload envoy, per update: affected clients are those whose window holds a changed name; per affected client and update, what it received, against the changed names its window holds (exact: one response holding exactly those); what all unaffected clients received over all updates:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | variant | workload | N | affected clients/update | responses/affected client/update | resources/affected client/update | changed in window/affected client | exact | bytes/affected client/update | responses to unaffected clients | fan-out p50 ms | p99 ms | serving CPU s/update |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range rows {
		e := s.Envoy
		fmt.Fprintf(w, "| %s | %s | %s | %d | %.1f | %s | %.3f | %.3f | %.1f%% | %.0f | %d | %.1f | %.1f | %.4f |\n",
			s.Mode, s.Variant, label(s.Workload, s.Names), s.Clients, e.AffectedPerUpdate, perUpdateText(e.ResponsesPerAffected),
			e.ResourcesPerAffected, e.ChangedInWindowPerAffected, 100*e.ExactFraction, e.BytesPerAffected, e.UnaffectedResponses,
			s.FanoutP50MS, s.FanoutP99MS, s.ServingCPUSPerUpdate)
	}
}

// writeInitialSync writes the cold initial sync of every scenario: a fresh
// serving process (the relay holds nothing), all N clients at once.
func writeInitialSync(w io.Writer, r Results) {
	fmt.Fprintln(w, "\nCold initial sync: a fresh origin or relay (nothing cached), all N clients connecting at once; time until every client holds its subscription, and what each received before the first update (1.00 response per client: all of it at once):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | variant | workload | N | names/client | initial sync s | responses/client | max responses/client | resources/client | bytes/client | relay gather windows expired |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Scenarios {
		if s.Error != "" {
			continue
		}
		expired := "-"
		if s.GatherExpired >= 0 && relayedMode(s.Mode) {
			expired = strconv.FormatFloat(s.GatherExpired, 'f', 0, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.2f | %s | %d | %.2f | %.0f | %s |\n", s.Mode, s.Variant, label(s.Workload, s.Names), s.Clients,
			s.Window, s.InitialSyncS, perUpdateText(s.InitialResponsesPerClient), s.InitialMaxResponses, s.InitialResourcesPerClient, s.InitialBytesPerClient, expired)
	}
}

// perUpdateText formats a count per client per update with two decimals,
// or five when two would round a value that is not 1 to 1.00: the target
// is exactly one response per client per update.
func perUpdateText(v float64) string {
	if t := fmt.Sprintf("%.2f", v); t != "1.00" || v == 1 {
		return t
	}
	return fmt.Sprintf("%.5f", v)
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// writeChart draws fan-out p99 against N, one line per mode, variant and
// workload: colour by mode, dashes for SotW, glyph by workload. A run of
// fairness scenarios only has none to draw.
func writeChart(path string, r Results) error {
	if len(r.Scenarios) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Fan-out p99 of one update (origin push → every client)"
	p.X.Label.Text = "clients (N)"
	p.Y.Label.Text = "p99 latency, ms"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	colors := map[string]color.Color{
		"direct":  color.RGBA{R: 200, G: 60, B: 40, A: 255},
		"relayed": color.RGBA{R: 30, G: 100, B: 200, A: 255},
		modeBare:  color.RGBA{R: 40, G: 160, B: 80, A: 255},
	}
	type series struct{ mode, variant, workload string }
	// Workload envoy runs at one N: a point, named with its names.
	lines := map[series]plotter.XYs{}
	var order []series
	for _, s := range r.Scenarios {
		if s.Error != "" {
			continue
		}
		k := series{s.Mode, s.Variant, label(s.Workload, s.Names)}
		if _, ok := lines[k]; !ok {
			order = append(order, k)
		}
		lines[k] = append(lines[k], plotter.XY{X: float64(s.Clients), Y: s.FanoutP99MS})
	}
	for _, k := range order {
		pts := lines[k]
		sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("chart %s %s %s: %w", k.mode, k.variant, k.workload, err)
		}
		l.Color, sc.Color = colors[k.mode], colors[k.mode]
		l.Width = vg.Points(2)
		if k.variant == "sotw" {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		switch {
		case k.workload == workloadAll:
			sc.Shape = draw.TriangleGlyph{}
		case strings.HasPrefix(k.workload, workloadEnvoy):
			sc.Shape = draw.SquareGlyph{}
		default:
			sc.Shape = draw.CircleGlyph{}
		}
		sc.Radius = vg.Points(4)
		p.Add(l, sc)
		p.Legend.Add(k.mode+" "+k.variant+" "+k.workload, l, sc)
	}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
