package integration

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// closeAsync starts r.Close; the returned channel is closed when it has
// returned (the test's Cleanup Close waits for it too).
func closeAsync(t *testing.T, stop func() error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := stop(); err != nil {
			t.Errorf("relay close: %v", err)
		}
	}()
	return done
}

// TestDrainDelayKeepsServing: on Close, /readyz turns 503 at once, and for
// downstream.drain_delay existing streams still get updates and new
// streams are still served; then the streams end with Unavailable. Times
// are asserted only as bounds a slow machine cannot break: nothing ends
// before the delay has passed, and Close returns within the delay, the
// grace period and xdstest.WaitTimeout.
func TestDrainDelayKeepsServing(t *testing.T) {
	const delay, grace = 5 * time.Second, 5 * time.Second // the delay outlasts the serving steps below, however slow
	o := newGCPOrigin(t)
	c1 := xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Downstream.DrainDelay = delay
		c.ShutdownGracePeriod = grace
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	old := newADSClient(t, conn, "delta", "old", "c", nil)
	old.subscribe(resource.ClusterType, c1)
	old.waitTimeout(c1, 1)

	began := time.Now()
	closed := closeAsync(t, r.Close)
	waitReadyz(t, r, "during the drain delay", http.StatusServiceUnavailable)
	o.set(resource.ClusterType, c1, cluster(c1, 2))
	old.waitTimeout(c1, 2) // an existing stream still gets updates
	late := newADSClient(t, conn, "delta", "late", "c", nil)
	late.subscribe(resource.ClusterType, c1)
	late.waitTimeout(c1, 2) // a new stream is still served
	if st := old.delta.Err(); st.Code() != codes.Unavailable {
		t.Errorf("after the drain delay: stream ended with %v, want Unavailable", st)
	}
	if ended := time.Since(began); ended < delay {
		t.Errorf("a stream ended %v after Close began, within the drain delay %v", ended, delay)
	}
	select {
	case <-closed:
	case <-time.After(delay + grace + xdstest.WaitTimeout - time.Since(began)):
		t.Fatalf("Close did not return within the drain delay %v, the grace period %v and %v", delay, grace, xdstest.WaitTimeout)
	}
	if took := time.Since(began); took < delay {
		t.Errorf("Close returned after %v, within the drain delay %v", took, delay)
	}
}

// TestDrainInWaves: 100 streams, downstream.drain_waves 4 over 2s: every
// stream ends with Unavailable, in waves, not at one instant. A wave
// starts no earlier than its turn (timers never fire early) and a stream
// is seen to end no earlier than it did, so the assertions are bounds
// that a slow machine cannot break, only loosen: no stream ends before
// Close began; before wave k's turn, at most k waves' worth of streams
// have ended; the last ends no sooner than the last wave's turn, and
// within the spread, the grace period and xdstest.WaitTimeout.
func TestDrainInWaves(t *testing.T) {
	const streams, waves = 100, 4
	const spread, grace = 2 * time.Second, 10 * time.Second
	const perWave, interval = (streams + waves - 1) / waves, spread / waves
	o := newGCPOrigin(t)
	c1 := xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Downstream.DrainWaves = waves
		c.Downstream.DrainDuration = spread
		c.ShutdownGracePeriod = grace
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	var (
		mu   sync.Mutex
		ends []time.Duration // guarded by mu; since began
		got  []codes.Code    // guarded by mu
		wg   sync.WaitGroup
	)
	var opened []*deltaADS
	for range streams {
		s := openDelta(t, conn)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c1}})
		s.Recv()
		opened = append(opened, s)
	}
	for i, s := range opened {
		select {
		case err := <-s.Errors():
			t.Fatalf("stream %d ended before Close began: %v", i, err)
		default:
		}
	}
	began := time.Now()
	for _, s := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case err := <-s.Errors():
				mu.Lock()
				ends = append(ends, time.Since(began))
				got = append(got, status.Code(err))
				mu.Unlock()
			case <-time.After(spread + grace + xdstest.WaitTimeout):
			}
		}()
	}
	<-closeAsync(t, r.Close)
	wg.Wait()
	if len(ends) != streams {
		t.Fatalf("%d of %d streams ended within the spread %v, the grace period %v and %v", len(ends), streams, spread, grace, xdstest.WaitTimeout)
	}
	for i, c := range got {
		if c != codes.Unavailable {
			t.Errorf("stream %d ended with %v, want Unavailable", i, c)
		}
	}
	slices.Sort(ends)
	for k := 1; k < waves; k++ {
		turn := time.Duration(k) * interval
		if n, _ := slices.BinarySearch(ends, turn); n > k*perWave {
			t.Errorf("%d streams ended before wave %d's turn (%v), want at most %d (%d waves of %d)", n, k, turn, k*perWave, k, perWave)
		}
	}
	if last, turn := ends[len(ends)-1], time.Duration(waves-1)*interval; last < turn {
		t.Errorf("the last stream ended %v after Close began, before the last wave's turn (%v)", last, turn)
	}
	t.Logf("%d streams ended between %v and %v after Close began", streams, ends[0], ends[len(ends)-1])
}

// TestMaxConnectionAge: a client connection older than
// downstream.max_connection_age gets a GOAWAY; after the grace its stream
// ends with Unavailable, the relay releases the stream, and the client
// reconnects and is served.
func TestMaxConnectionAge(t *testing.T) {
	o := newGCPOrigin(t)
	c1 := xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Downstream.MaxConnectionAge = 500 * time.Millisecond
		c.Downstream.MaxConnectionAgeGrace = 300 * time.Millisecond
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	first := newADSClient(t, conn, "delta", "first", "c", nil)
	first.subscribe(resource.ClusterType, c1)
	first.waitTimeout(c1, 1)
	if st := first.delta.Err(); st.Code() != codes.Unavailable {
		t.Errorf("stream past the connection age: %v, want Unavailable", st)
	}
	waitRelayMetric(t, r, "the ended stream released", func(v float64) bool { return v == 0 }, "xds_relay_downstream_streams", "variant", "delta")
	again := newADSClient(t, conn, "delta", "again", "c", nil) // grpc-go dials a new connection
	again.subscribe(resource.ClusterType, c1)
	again.waitTimeout(c1, 1)
}
