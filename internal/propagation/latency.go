package propagation

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// latency is one change's arrival → ACK times, one sample per client
// stream that ACKed it: log-linear buckets (below 16 µs one per
// microsecond, then 16 per doubling, so a bucket is at most 1/16 of its
// lower bound wide), counted with atomics. A quantile is its bucket's
// middle: within 3.2% of the true sample (±3.2 ms at 100 ms), where
// Prometheus's few buckets would be off by tens of milliseconds. 400
// buckets up to 2^27 µs (134 s); longer lands in the last one.
type latency struct {
	counts [numBuckets]atomic.Uint32
	n      atomic.Uint32
	max    atomic.Int64 // nanoseconds
}

const (
	linearMicros = 16 // below this, one bucket per microsecond
	perDoubling  = 16 // buckets per doubling above it
	topOctave    = 27 // 2^27 µs: the last bucket counts what is longer
	numBuckets   = linearMicros + (topOctave-3)*perDoubling
)

// bucketOf is the bucket of d.
func bucketOf(d time.Duration) int {
	if d < 0 {
		d = 0
	}
	us := uint64(d / time.Microsecond)
	if us < linearMicros {
		return int(us)
	}
	e := bits.Len64(us) - 1 // 4 or more
	if e > topOctave {
		return numBuckets - 1
	}
	sub := int(us>>(e-4)) & (perDoubling - 1)
	return linearMicros + (e-4)*perDoubling + sub
}

// bucketBounds is bucket i's range [lo, hi).
func bucketBounds(i int) (lo, hi time.Duration) {
	if i < linearMicros {
		return time.Duration(i) * time.Microsecond, time.Duration(i+1) * time.Microsecond
	}
	e := (i-linearMicros)/perDoubling + 4
	sub := (i - linearMicros) % perDoubling
	return time.Duration((16+sub)<<(e-4)) * time.Microsecond, time.Duration((17+sub)<<(e-4)) * time.Microsecond
}

func (l *latency) observe(d time.Duration) {
	l.counts[bucketOf(d)].Add(1)
	l.n.Add(1)
	for {
		m := l.max.Load()
		if int64(d) <= m || l.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile returns the q-quantile (0 < q ≤ 1) of the samples, 0 when
// there are none: the middle of the bucket that counts it, never above the
// largest sample.
func (l *latency) quantile(q float64) time.Duration {
	n := l.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint32(q*float64(n) + 0.999999)
	rank = max(1, min(rank, n))
	var seen uint32
	for i := range l.counts {
		if seen += l.counts[i].Load(); seen >= rank {
			lo, hi := bucketBounds(i)
			return min((lo+hi)/2, time.Duration(l.max.Load()))
		}
	}
	return time.Duration(l.max.Load()) // counted while this walked
}

// Bucket is one non-empty latency bucket: Count samples in [LowS, HighS)
// seconds. What /debug/propagation?buckets=1 lists, so that a reader can
// pool several changes' samples (bench/run does).
type Bucket struct {
	LowS  float64 `json:"low_s"`
	HighS float64 `json:"high_s"`
	Count uint32  `json:"count"`
}

// buckets lists the non-empty buckets, shortest first.
func (l *latency) buckets() []Bucket {
	var out []Bucket
	for i := range l.counts {
		if c := l.counts[i].Load(); c > 0 {
			lo, hi := bucketBounds(i)
			out = append(out, Bucket{LowS: lo.Seconds(), HighS: hi.Seconds(), Count: c})
		}
	}
	return out
}
