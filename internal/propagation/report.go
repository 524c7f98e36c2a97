package propagation

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// maxLinesPerScan bounds the lines one scan logs; the rest are summed up
// in one more line (a burst of origin changes is not a burst of logs).
const maxLinesPerScan = 10

// Run logs each listed change once: when it has converged (every stream
// it was sent to settled, after the fan-out), or when ReportAfter has
// passed without that, with the number of streams still pending. A
// change no client was sent is not logged. It returns when ctx ends.
func (l *Ledger) Run(ctx context.Context) error {
	t := time.NewTicker(l.scanEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.scan(l.now())
		}
	}
}

// scan logs the changes due at now (see Run).
func (l *Ledger) scan(now time.Time) {
	var lines, more int
	for _, c := range l.listed("") {
		if c.reported.Load() {
			continue
		}
		n := c.Counts()
		settled := c.announced.Load() != 0 && n.Pending == 0
		overdue := now.Sub(c.arrived) >= l.reportAfter
		if !settled && !overdue {
			continue
		}
		c.reported.Store(true)
		if n.Sent == 0 {
			continue // nobody was sent it: nothing to tell
		}
		if lines == maxLinesPerScan {
			more++
			continue
		}
		lines++
		l.logChange(c.view(now, false), settled)
	}
	if more > 0 {
		l.lg.Info("more changes settled or overdue; see "+l.pagePath, zap.Int("changes", more))
	}
}

// logChange writes v's line: converged, settled with NACKs, or overdue.
func (l *Ledger) logChange(v ChangeView, settled bool) {
	fields := []zap.Field{zap.Uint64("change", v.ID), zap.String("authority", v.Authority), zap.String("type", v.Type),
		zap.String("version", v.Version), zap.Int("resources", v.Resources), zap.String("first", v.First),
		zap.Int64("sent", v.Sent), zap.Int64("acked", v.Acked), zap.Int64("nacked", v.Nacked),
		zap.Int64("pending", v.Pending), zap.Float64("p50_ms", v.P50MS), zap.Float64("p99_ms", v.P99MS),
		zap.Float64("last_ack_ms", v.LastAckMS)}
	if len(v.Reasons) > 0 {
		fields = append(fields, zap.String("nack", v.Reasons[0].Message))
	}
	switch {
	case !settled:
		l.lg.Warn("change not converged", append(fields, zap.Duration("after", l.reportAfter))...)
	case v.Nacked > 0:
		l.lg.Warn("change settled, NACKed by some clients", fields...)
	default:
		l.lg.Info("change converged", fields...)
	}
}
