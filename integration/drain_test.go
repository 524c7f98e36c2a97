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
// streams are still served; then the streams end with Unavailable.
func TestDrainDelayKeepsServing(t *testing.T) {
	o := newGCPOrigin(t)
	c1 := xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Downstream.DrainDelay = 3 * time.Second
		c.ShutdownGracePeriod = 5 * time.Second
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	old := newADSClient(t, conn, "delta", "old", "c", nil)
	old.subscribe(resource.ClusterType, c1)
	old.waitTimeout(c1, 1)

	closed := closeAsync(t, r.Close)
	readyz := "http://" + r.AdminAddr() + "/readyz"
	deadline := time.Now().Add(xdstest.WaitTimeout)
	for code, _ := adminDo(t, http.MethodGet, readyz, ""); code != http.StatusServiceUnavailable; code, _ = adminDo(t, http.MethodGet, readyz, "") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d during the drain delay, want 503", code)
		}
	}
	o.set(resource.ClusterType, c1, cluster(c1, 2))
	old.waitTimeout(c1, 2) // an existing stream still gets updates
	late := newADSClient(t, conn, "delta", "late", "c", nil)
	late.subscribe(resource.ClusterType, c1)
	late.waitTimeout(c1, 2) // a new stream is still served
	select {
	case <-closed:
		t.Fatal("Close returned within the drain delay")
	default:
	}
	if st := old.delta.Err(); st.Code() != codes.Unavailable {
		t.Errorf("after the drain delay: stream ended with %v, want Unavailable", st)
	}
	<-closed
}

// TestDrainInWaves: 100 streams, downstream.drain_waves 4 over 2s: the
// streams' end times cluster into at least 3 groups (not one instant), and
// every stream ends with Unavailable.
func TestDrainInWaves(t *testing.T) {
	const streams, waves = 100, 4
	const spread = 2 * time.Second
	o := newGCPOrigin(t)
	c1 := xdstpName(dsAuthority, "envoy.config.cluster.v3.Cluster", "c1")
	o.set(resource.ClusterType, c1, cluster(c1, 1))
	r := startRelay(t, func(c *config.Config) {
		c.Log.Level = config.LogInfo
		c.Downstream.DrainWaves = waves
		c.Downstream.DrainDuration = spread
		c.ShutdownGracePeriod = 10 * time.Second
	}, o.addr)
	conn := dial(t, r.XDSAddr())
	var (
		mu   sync.Mutex
		ends []time.Time  // guarded by mu
		got  []codes.Code // guarded by mu
		wg   sync.WaitGroup
	)
	for range streams {
		s := openDelta(t, conn)
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{c1}})
		s.Recv()
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case err := <-s.Errors():
				mu.Lock()
				ends = append(ends, time.Now())
				got = append(got, status.Code(err))
				mu.Unlock()
			case <-time.After(2 * xdstest.WaitTimeout):
			}
		}()
	}
	<-closeAsync(t, r.Close)
	wg.Wait()
	if len(ends) != streams {
		t.Fatalf("%d of %d streams ended", len(ends), streams)
	}
	for i, c := range got {
		if c != codes.Unavailable {
			t.Errorf("stream %d ended with %v, want Unavailable", i, c)
		}
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	// Waves are spread/waves = 500ms apart: a gap of more than half that
	// between consecutive ends starts a new group.
	groups := 1
	for i := 1; i < len(ends); i++ {
		if ends[i].Sub(ends[i-1]) > spread/waves/2 {
			groups++
		}
	}
	if groups < 3 {
		t.Errorf("stream ends form %d groups over %v, want at least 3 (waves)", groups, ends[len(ends)-1].Sub(ends[0]))
	}
	t.Logf("%d streams ended in %d groups over %v", streams, groups, ends[len(ends)-1].Sub(ends[0]))
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
