package propagation

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every duration lands in the bucket whose bounds hold it, and the
// buckets tile the line without gaps.
func TestLatencyBuckets(t *testing.T) {
	for i := 0; i < numBuckets-1; i++ {
		_, hi := bucketBounds(i)
		lo, _ := bucketBounds(i + 1)
		if hi != lo {
			t.Fatalf("bucket %d ends at %v, bucket %d starts at %v", i, hi, i+1, lo)
		}
	}
	for _, d := range []time.Duration{0, time.Microsecond, 15 * time.Microsecond, 16 * time.Microsecond, 17 * time.Microsecond,
		time.Millisecond, 99 * time.Millisecond, time.Second, time.Minute, 2 * time.Minute} {
		i := bucketOf(d)
		lo, hi := bucketBounds(i)
		if d.Truncate(time.Microsecond) < lo || d >= hi {
			t.Errorf("%v in bucket %d [%v, %v)", d, i, lo, hi)
		}
		if lo >= 16*time.Microsecond && float64(hi-lo) > float64(lo)/16+float64(time.Microsecond) {
			t.Errorf("bucket %d [%v, %v) is wider than 1/16 of its lower bound", i, lo, hi)
		}
	}
	if got := bucketOf(time.Hour); got != numBuckets-1 {
		t.Errorf("an hour in bucket %d, want the last (%d)", got, numBuckets-1)
	}
	if got := bucketOf(-time.Second); got != 0 {
		t.Errorf("a negative duration in bucket %d, want 0", got)
	}
}

// A quantile is within 3.2% of the exact one (plus a microsecond).
func TestLatencyQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l latency
	var exact []time.Duration
	for range 10000 {
		d := time.Duration(rng.ExpFloat64() * float64(20*time.Millisecond))
		l.observe(d)
		exact = append(exact, d)
	}
	slices.Sort(exact)
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		want := exact[int(q*float64(len(exact)))-1]
		got := l.quantile(q)
		if diff := float64(got-want) / float64(want); diff > 0.032 || diff < -0.032 {
			t.Errorf("q%v = %v, exact %v (%.1f%% off)", q, got, want, diff*100)
		}
	}
	if got := new(latency).quantile(0.5); got != 0 {
		t.Errorf("quantile of nothing = %v, want 0", got)
	}
}
