package downstream

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// BenchmarkConfigStatus measures one CSDS report over a fleet of delta
// clients holding 10 resources each, at the csds package's default bounds
// (1000 clients, 20000 entries): the sessions past the first 1000 are
// only matched and counted.
func BenchmarkConfigStatus(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			e := newEnv(b, 0)
			r := res(edsType, xdstp(edsType, "r"), "1")
			for i := range n {
				ss := newSession(e.srv, xdstype.Delta, "", "bench", access.Identity{}, nil)
				ss.node = &corev3.Node{Id: fmt.Sprintf("node-%d", i)}
				ts := newTypeState(edsType)
				ss.types.set(edsType, ts)
				for j := range 10 {
					name := xdstp(edsType, fmt.Sprintf("r%d", j))
					ts.addLocked(name, key(edsType, name), false)
					ts.sent.set(name, sentRevOf(r, 1))
				}
				ts.answered = 1
				e.srv.addSession(ss)
			}
			b.ReportAllocs()
			for b.Loop() {
				rep := e.srv.ConfigStatus(StatusQuery{MaxClients: 1000, MaxResources: 20000})
				if len(rep.Clients) != min(n, 1000) {
					b.Fatalf("%d clients", len(rep.Clients))
				}
			}
		})
	}
}
