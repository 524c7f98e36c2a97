package downstream

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/access"
	"google.golang.org/grpc/mem"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func cmpDiff(want, got any) string { return cmp.Diff(want, got) }

// BenchmarkEnvelope measures building one client's response to one update,
// and applying the client's ACK of it: the per-client cost of fan-out (the
// envelope around the shared body), with the propagation ledger (the
// revisions point to its records: the response notes its change, the ACK
// settles it) and without; with safe delivery (each revision rolling out,
// its key's last accepted revision beside it: the writer's check of what
// this client is served) and without (benchFeatures).
func BenchmarkEnvelope(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
			for _, f := range benchFeatures {
				b.Run(fmt.Sprintf("variant=%s/size=%d/%s", variant, size, f), func(b *testing.B) {
					benchmarkEnvelope(b, variant, size, f)
				})
			}
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func benchmarkEnvelope(b *testing.B, variant xdstype.Variant, size int, f features) {
	ledger := f.ledger
	srv := &Server{lg: zap.NewNop(), m: newMetrics(nil), counts: newClientCounts()}
	ss := newSession(srv, variant, "", "bench", access.Identity{}, nil)
	ts := ss.typeLocked(edsType)
	k := cache.Key{Link: cache.LinkID{Authority: authority}, TypeURL: edsType, Name: "r"}
	ts.addLocked("r", k, false)
	body := &anypb.Any{TypeUrl: edsType, Value: make([]byte, size)}
	revs := [2]*cache.Resource{
		{Name: "r", Version: "1", Body: body, Arrived: time.Now()},
		{Name: "r", Version: "2", Body: body, Arrived: time.Now()},
	}
	if ledger {
		l := propagation.New(propagation.Options{Registry: prometheus.NewRegistry()})
		for _, r := range revs {
			r.Change = l.Begin(authority, edsType, r.Arrived)
			l.Add(r.Change)
		}
	}
	var entries [2]mem.Buffer
	for i, r := range revs {
		if variant == xdstype.Delta {
			entries[i] = deltaEntry("r", r, false)
		} else {
			entries[i] = sotwEntry("r", r, false, ts.wrap)
		}
	}
	w := new(work) // reused, as the writer reuses pooled rounds
	var out []outMsg
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.reset()
		w.ts = ts
		p := probe{name: "r", key: k, res: revs[i%2], state: cache.StatePresent}
		if f.delivery {
			p.ro = cache.Rollout{Accepted: revs[(i+1)%2]}
		}
		w.probes = append(w.probes, p)
		if f.delivery {
			ss.servedLocked(w) // rollout.go: what this client is served
		}
		// out is reused, as responsesLocked's slice is made once per
		// round, not per type.
		if variant == xdstype.Delta {
			out = ss.deltaResponsesLocked(out[:0], w)
		} else {
			out = ss.sotwResponsesLocked(out[:0], w)
		}
		if len(out) != 1 {
			b.Fatalf("%d responses, want 1", len(out))
		}
		// The revision's entry is encoded once, then shared.
		if e := out[0].msg.shared; len(e) != 1 || e[0].Len() < size || &e[0].ReadOnlyData()[0] != &entries[i%2].ReadOnlyData()[0] {
			b.Fatal("resource encoded per response")
		}
		ss.answerLocked(ts, ts.lastNonce, strconv.FormatUint(ts.version, 10), nil) // the client's ACK
	}
	if ledger && revs[0].Change.Counts().Acked == 0 {
		b.Fatal("the ledger counted no ACK")
	}
}

// BenchmarkFanout measures one update reaching N delta clients end to end
// over loopback gRPC: Apply to the cache, until every client received it;
// each client ACKs what it receives. As the relay runs (the propagation
// ledger, each ACK settling the change; safe delivery at its defaults:
// the version validated, the update screened, its rollout kept, the last
// accepted version beside it), with safe delivery off, and with both off:
// what each costs.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, f := range benchFeatures {
			b.Run(fmt.Sprintf("clients=%d/%s", n, f), func(b *testing.B) {
				benchmarkFanout(b, n, f)
			})
		}
	}
}

// benchFeatures are the feature sets the benchmarks compare: the relay's
// defaults, safe delivery off, both the ledger and delivery off.
var benchFeatures = []features{{ledger: true, delivery: true}, {ledger: true}, {}}

func benchmarkFanout(b *testing.B, n int, f features) {
	e := newEnvOn(b, newTestCacheWith(b, f), 0)
	name := xdstp(edsType, "fan")
	k := key(edsType, name)
	e.cache.set(k, res(edsType, name, "0"))
	got := make(chan struct{}, n)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	b.Cleanup(func() { close(stop); wg.Wait() })
	for i := 0; i < n; i++ {
		c := e.delta()
		c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
		c.Recv()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case r := <-c.Responses():
					got <- struct{}{}
					c.Send(ack(edsType, r))
				case <-stop:
					return
				}
			}
		}()
	}
	// Two revisions with different bytes, alternating: each set is
	// a change (the cache compares bytes, not versions).
	bodies := [2]*anypb.Any{res(edsType, name, "x").Body, res(edsType, name, "y").Body}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.cache.set(k, &cache.Resource{Name: name, Body: bodies[i%2], Arrived: time.Now()})
		for j := 0; j < n; j++ {
			<-got
		}
	}
}
