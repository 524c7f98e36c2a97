package upstream

import (
	"math/rand/v2"
	"time"
)

// backoff yields jittered exponential waits between attempts. Owned by one
// link's run goroutine.
type backoff struct {
	cfg  Backoff
	next time.Duration
}

// newBackoff starts at cfg.Initial; cfg is valid (Options.validate).
func newBackoff(cfg Backoff) *backoff {
	return &backoff{cfg: cfg, next: cfg.Initial}
}

// wait returns the next wait and grows the one after.
func (b *backoff) wait() time.Duration {
	d := b.next
	b.next = min(time.Duration(float64(b.next)*b.cfg.Multiplier), b.cfg.Max)
	j := (rand.Float64()*2 - 1) * b.cfg.Jitter * float64(d)
	return max(time.Duration(float64(d)+j), 0)
}

// reset starts over at Initial (after a healthy attempt).
func (b *backoff) reset() { b.next = b.cfg.Initial }
