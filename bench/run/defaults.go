package main

import (
	"fmt"
	"io"
)

// writeDefaultsCost writes, for every scenario run both relayed and bare
// (--modes …,relayed,bare), what the relay's defaults cost: the
// propagation ledger and safe delivery on (relayed) against both off
// (bare), in serving CPU per update, fan-out p99, RSS per stream and
// initial sync, each as relayed ÷ bare. The bound they are read against:
// CPU per update and p99 within 5%, at most 1 KiB more per stream.
func writeDefaultsCost(w io.Writer, r Results) {
	type pair struct{ on, off *Scenario }
	var rows []pair
	for i := range r.Scenarios {
		on := &r.Scenarios[i]
		if on.Mode != modeRelayed || on.Error != "" {
			continue
		}
		if off := findMode(r.Scenarios, modeBare, on); off != nil {
			rows = append(rows, pair{on, off})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhat the relay's defaults cost, in the same run: relayed (propagation ledger and safe delivery at their defaults) against bare (propagation.enabled false, safe delivery off); the bound is CPU per update and fan-out p99 within 5%, at most +1 KiB RSS per stream:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| variant | workload | N | CPU s/update relayed | bare | ratio | p99 ms relayed | bare | ratio | RSS KiB/stream relayed | bare | Δ KiB | sync s relayed | bare |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range rows {
		on, off := p.on, p.off
		fmt.Fprintf(w, "| %s | %s | %d | %.3f | %.3f | %.2f | %.1f | %.1f | %.2f | %.1f | %.1f | %+.1f | %.2f | %.2f |\n",
			on.Variant, label(on.Workload, on.Names), on.Clients,
			on.ServingCPUSPerUpdate, off.ServingCPUSPerUpdate, ratio(on.ServingCPUSPerUpdate, off.ServingCPUSPerUpdate),
			on.FanoutP99MS, off.FanoutP99MS, ratio(on.FanoutP99MS, off.FanoutP99MS),
			on.RSSPerStreamKiB, off.RSSPerStreamKiB, on.RSSPerStreamKiB-off.RSSPerStreamKiB,
			on.InitialSyncS, off.InitialSyncS)
	}
}

// findMode returns the scenario of mode that ran like s (variant,
// workload, names, N), or nil.
func findMode(all []Scenario, mode string, s *Scenario) *Scenario {
	for i := range all {
		o := &all[i]
		if o.Mode == mode && o.Error == "" && o.Variant == s.Variant && o.Workload == s.Workload && o.Names == s.Names && o.Clients == s.Clients {
			return o
		}
	}
	return nil
}

// ratio is a ÷ b, 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
