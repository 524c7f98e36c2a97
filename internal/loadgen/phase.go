package loadgen

import (
	"fmt"
	"slices"
	"time"
)

// PhaseRequest asks for the fan-out latency over one phase of a run: the
// samples each client took between two of its ClientCounts.Updated
// counts (one sample per stamped resource received while synced).
type PhaseRequest struct {
	From []int64 `json:"from"`
	// To: each client's count at the phase's end; nil: up to now.
	To []int64 `json:"to,omitempty"`
	// ExcludeStalling leaves the stalling clients (Config.StallEvery) out:
	// the others' latency.
	ExcludeStalling bool `json:"exclude_stalling"`
}

// Latency is a fan-out latency distribution.
type Latency struct {
	Samples int     `json:"samples"`
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
	MaxMS   float64 `json:"max_ms"`
}

// PhaseLatency returns the fan-out latency of the samples req selects.
func (f *Fleet) PhaseLatency(req PhaseRequest) (Latency, error) {
	n := len(f.clients)
	if len(req.From) != n || (req.To != nil && len(req.To) != n) {
		return Latency{}, fmt.Errorf("%w: from and to need one count per client (%d), got %d and %d", ErrConfig, n, len(req.From), len(req.To))
	}
	var samples []time.Duration
	for i, c := range f.clients {
		if req.ExcludeStalling && f.cfg.stalls(i) {
			continue
		}
		c.mu.Lock()
		to := int64(len(c.latencies))
		if req.To != nil {
			to = min(to, req.To[i])
		}
		if from := max(0, req.From[i]); from < to {
			samples = append(samples, c.latencies[from:to]...)
		}
		c.mu.Unlock()
	}
	var l Latency
	if l.Samples = len(samples); l.Samples > 0 {
		slices.Sort(samples)
		l.P50MS = ms(percentile(samples, 0.50))
		l.P99MS = ms(percentile(samples, 0.99))
		l.MaxMS = ms(samples[len(samples)-1])
	}
	return l, nil
}
