package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// The relay's propagation ledger beside the load generator: for the
// changes of the update phase, the ledger's arrival → ACK times (the
// relay's clock, one sample per client stream and change, from
// /debug/propagation?buckets=1) against the load generator's push →
// receipt times (the clients' clock, one sample per client and changed
// resource). On loopback the two should agree within ledgerAgreeMS.

// ledgerAgreeMS is how far apart the ledger's p50 and p99 and the load
// generator's may be on loopback.
const ledgerAgreeMS = 10

// LedgerFigures is what the ledger says of the update phase's changes.
type LedgerFigures struct {
	Changes int   `json:"changes"`
	Sent    int64 `json:"sent"`
	Acked   int64 `json:"acked"`
	Nacked  int64 `json:"nacked"`
	Pending int64 `json:"pending"`
	// P50MS, P99MS, MaxMS: arrival → ACK pooled over those changes (each
	// sample within 3.2%: the ledger's buckets).
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// ledgerPage is the part of the relay's /debug/propagation the harness
// reads (internal/propagation's Page).
type ledgerPage struct {
	Changes []ledgerChange `json:"changes"`
}

// ledgerChange is one change of a ledgerPage.
type ledgerChange struct {
	Arrived time.Time      `json:"arrived"`
	Sent    int64          `json:"sent"`
	Acked   int64          `json:"acked"`
	Nacked  int64          `json:"nacked"`
	Pending int64          `json:"pending"`
	MaxMS   float64        `json:"max_ms"`
	Buckets []ledgerBucket `json:"buckets"`
}

// ledgerBucket is one latency bucket of a ledgerChange: Count samples in
// [LowS, HighS) seconds.
type ledgerBucket struct {
	LowS  float64 `json:"low_s"`
	HighS float64 `json:"high_s"`
	Count int64   `json:"count"`
}

// readLedger reads the relay's ledger at admin and pools the changes that
// arrived from since to until.
func readLedger(admin string, since, until time.Time) (*LedgerFigures, error) {
	var p ledgerPage
	if err := getJSON("http://"+admin+"/debug/propagation?buckets=1", &p); err != nil {
		return nil, fmt.Errorf("propagation ledger: %w", err)
	}
	return poolLedger(p, since, until), nil
}

// poolLedger pools p's changes that arrived from since to until.
func poolLedger(p ledgerPage, since, until time.Time) *LedgerFigures {
	f := &LedgerFigures{}
	type bucket struct{ lo, hi float64 }
	counts := map[bucket]int64{}
	for _, c := range p.Changes {
		if c.Arrived.Before(since) || c.Arrived.After(until) {
			continue
		}
		f.Changes++
		f.Sent, f.Acked, f.Nacked, f.Pending = f.Sent+c.Sent, f.Acked+c.Acked, f.Nacked+c.Nacked, f.Pending+c.Pending
		f.MaxMS = math.Max(f.MaxMS, c.MaxMS)
		for _, b := range c.Buckets {
			counts[bucket{b.LowS, b.HighS}] += b.Count
		}
	}
	bs := make([]bucket, 0, len(counts))
	var n int64
	for b, c := range counts {
		bs = append(bs, b)
		n += c
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].lo < bs[j].lo })
	quantile := func(q float64) float64 {
		rank := int64(math.Ceil(q * float64(n)))
		var seen int64
		for _, b := range bs {
			if seen += counts[b]; seen >= max(rank, 1) {
				return math.Min((b.lo+b.hi)/2*1000, f.MaxMS)
			}
		}
		return 0
	}
	f.P50MS, f.P99MS = quantile(0.5), quantile(0.99)
	return f
}

// writeLedger writes, for every relayed scenario the ledger measured, its
// figures beside the load generator's.
func writeLedger(w io.Writer, r Results) {
	var rows []Scenario
	for _, s := range r.Scenarios {
		if s.Error == "" && s.Ledger != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nThe relay's propagation ledger beside the load generator, over the update phase's changes: the ledger's arrival at the relay → each client stream's ACK (the relay's clock, one sample per stream and change; /debug/propagation) against the load generator's push → receipt (the clients' clock, one sample per client and changed resource); they should agree within %d ms on loopback:\n\n", ledgerAgreeMS)
	fmt.Fprintln(w, "| variant | workload | N | changes | sent | ACKed | NACKed | pending | ledger p50 ms | loadgen p50 ms | ledger p99 ms | loadgen p99 ms |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range rows {
		l := s.Ledger
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %.1f | %.1f | %.1f | %.1f |\n", s.Variant, label(s.Workload, s.Names), s.Clients,
			l.Changes, l.Sent, l.Acked, l.Nacked, l.Pending, l.P50MS, s.FanoutP50MS, l.P99MS, s.FanoutP99MS)
	}
}

// ledgerAgreement checks, per relayed scenario at the target N that the
// ledger measured, that its p50 and p99 agree with the load generator's.
func (c *targetCheck) ledgerAgreement() {
	for _, s := range c.r.Scenarios {
		if s.Mode != "relayed" || s.Clients != c.n || s.Error != "" || s.Ledger == nil {
			continue
		}
		l := s.Ledger
		d50, d99 := math.Abs(l.P50MS-s.FanoutP50MS), math.Abs(l.P99MS-s.FanoutP99MS)
		c.add(fmt.Sprintf("propagation ledger against the load generator, p50 and p99 (%s, %s)", label(s.Workload, s.Names), s.Variant),
			fmt.Sprintf("within %d ms", ledgerAgreeMS), true,
			fmt.Sprintf("%.1f / %.1f ms vs %.1f / %.1f ms", l.P50MS, l.P99MS, s.FanoutP50MS, s.FanoutP99MS),
			d50 <= ledgerAgreeMS && d99 <= ledgerAgreeMS)
	}
}
