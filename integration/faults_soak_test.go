package integration

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/xds-relay/xds-relay/config"
)

// Soak parameters (make soak; SOAKTIME sets the duration).
const (
	soakClients     = 200                    // clients connected at any time, delta and SotW
	soakConns       = 4                      // gRPC connections they share
	soakResources   = 20                     // ClusterLoadAssignments every client watches
	soakRound       = 250 * time.Millisecond // one round: churn, an update, every client checked
	soakChurn       = 5                      // clients that leave, and as many that join, per round
	soakFlapEvery   = 40                     // rounds between origin outages
	soakSampleEvery = time.Minute            // how often memory and goroutines are printed
)

// TestSoak runs only when SOAKTIME is set (make soak, SOAKTIME=30m by
// default): for that long, one relay in front of one origin serves
// soakClients clients while, every round, soakChurn of them leave and as
// many join, the origin changes one resource, and every client is checked
// to hold exactly the origin's state; every soakFlapEvery rounds the
// origin goes down (changing a resource meanwhile) for one to three of the
// relay's reconnect attempts. Every minute it prints the process's RSS,
// live heap and goroutines (origin, relay and clients share the process;
// the client count is the same at every sample). It fails when a client
// holds the wrong state, or when the second half of the samples exceeds
// the first half by more than soakGrowth allows.
func TestSoak(t *testing.T) {
	env := os.Getenv("SOAKTIME")
	if env == "" {
		t.Skip("SOAKTIME not set (make soak)")
	}
	soak, err := time.ParseDuration(env)
	if err != nil || soak < 2*soakSampleEvery {
		t.Fatalf("SOAKTIME=%q: want a duration of at least %v (%v)", env, 2*soakSampleEvery, err)
	}
	// go test runs with -timeout 0 here; a soak stuck for 10 minutes past
	// its time dies with every goroutine's stack, as -timeout would.
	watchdog := time.AfterFunc(soak+10*time.Minute, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("soak still running %v after SOAKTIME=%v", 10*time.Minute, soak))
	})
	defer watchdog.Stop()
	seed := uint64(time.Now().UnixNano())
	t.Logf("soak for %v, seed %d", soak, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	quiet := linearOrigin()
	quiet.countOnly = true // the heap sampled below is the relay's
	o, gate := gateOrigin(t, quiet)
	names := endpointNames("soak", soakResources)
	revs := revisions(names, 1)
	o.setAll(resource.EndpointType, clas(revs))
	r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogWarn }, o.addr)
	conns := make([]*grpc.ClientConn, soakConns)
	for i := range conns {
		conns[i] = dial(t, r.XDSAddr())
	}

	pool := make([]*adsClient, soakClients)
	stops := make([]func(), soakClients)
	joined := 0
	join := func(i int) {
		v := [...]string{"delta", "sotw"}[rng.IntN(2)]
		pool[i], stops[i] = startADSClient(t, conns[rng.IntN(soakConns)], v, fmt.Sprintf("soak-%s-%d", v, joined), "", nil)
		pool[i].subscribe(resource.EndpointType, names...)
		joined++
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for i := range pool {
		join(i)
	}
	(&fleet{t: t, clients: pool}).waitRevisions(revs)

	var samples []soakSample
	start := time.Now()
	nextSample := start.Add(soakSampleEvery)
	tick := time.NewTicker(soakRound) // the pace of the rounds, not a wait for an event
	defer tick.Stop()
	rounds, flaps := 0, 0
	for time.Since(start) < soak {
		<-tick.C
		rounds++
		for range soakChurn {
			i := rng.IntN(soakClients)
			stops[i]()
			join(i)
		}
		name := names[rng.IntN(soakResources)]
		revs[name]++
		if rounds%soakFlapEvery == 0 {
			flaps++
			from := gate.count()
			gate.down()
			o.setAll(resource.EndpointType, clas(map[string]uint32{name: revs[name]}))
			gate.waitRefused(from, 1+rng.IntN(3))
			gate.up()
		} else {
			o.setAll(resource.EndpointType, clas(map[string]uint32{name: revs[name]}))
		}
		(&fleet{t: t, clients: pool}).waitRevisions(revs)

		if now := time.Now(); !now.Before(nextSample) {
			nextSample = nextSample.Add(soakSampleEvery)
			s := takeSoakSample(t, now.Sub(start))
			samples = append(samples, s)
			t.Logf("soak %v: %d rounds, %d clients joined, %d flaps; RSS %.1f MiB, heap %.1f MiB, goroutines %d, cached resources %v",
				s.at.Round(time.Second), rounds, joined, flaps, mib(s.rss), mib(s.heap), s.goroutines,
				relayMetric(t, r, "xds_relay_cache_resources"))
		}
	}
	(&fleet{t: t, clients: pool}).wantStreamsOpen()
	if err := soakGrowth(samples); err != nil {
		t.Error(err)
	}
}

// soakSample is the process's figures at one time of the soak.
type soakSample struct {
	at         time.Duration
	rss        uint64 // bytes resident (VmRSS)
	heap       uint64 // bytes of live heap after a GC
	goroutines int
}

func takeSoakSample(t *testing.T, at time.Duration) soakSample {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return soakSample{at: at, rss: rss(t), heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// rss is the process's resident set size, from /proc/self/status.
func rss(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("RSS: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("RSS: %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("RSS: no VmRSS in /proc/self/status (%v)", sc.Err())
	return 0
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// soakGrowth says whether the later half of samples outgrew the earlier
// half: its highest live heap more than 1.5× the earlier highest plus 16
// MiB, its RSS more than 1.5× plus 64 MiB, or its goroutines more than
// 1.2× plus 100. A leak per client, per flap or per update grows with the
// rounds and trips it over a long soak; a working set that levels off
// does not.
func soakGrowth(samples []soakSample) error {
	if len(samples) < 2 {
		return fmt.Errorf("soak: %d samples, want at least 2 to compare", len(samples))
	}
	half := len(samples) / 2
	highest := func(ss []soakSample, f func(soakSample) float64) float64 {
		m := 0.0
		for _, s := range ss {
			m = max(m, f(s))
		}
		return m
	}
	for _, c := range []struct {
		what        string
		of          func(soakSample) float64
		factor, add float64
	}{
		{"live heap (MiB)", func(s soakSample) float64 { return mib(s.heap) }, 1.5, 16},
		{"RSS (MiB)", func(s soakSample) float64 { return mib(s.rss) }, 1.5, 64},
		{"goroutines", func(s soakSample) float64 { return float64(s.goroutines) }, 1.2, 100},
	} {
		early, late := highest(samples[:half], c.of), highest(samples[half:], c.of)
		if late > early*c.factor+c.add {
			return fmt.Errorf("soak: %s grew from %.1f (first %d samples) to %.1f (last %d), more than %.1f×+%.0f",
				c.what, early, half, late, len(samples)-half, c.factor, c.add)
		}
	}
	return nil
}
