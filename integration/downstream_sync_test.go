package integration

import (
	"fmt"
	"maps"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
)

// A client subscribing to many names at once gets them in one response,
// as from the origin itself, even when the relay holds some of them and
// must ask the origin for the others: here another client's subscription
// brought half of them in first.
func TestSyncWarmAndColdInOneResponse(t *testing.T) {
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			o := newGCPOrigin(t)
			names := endpointNames("sync", 20)
			o.setAll(resource.EndpointType, clas(revisions(names, 1)))
			r := startRelay(t, nil, o.addr)
			conn := dial(t, r.XDSAddr())

			first := newADSClient(t, conn, variant, "first", "", nil)
			first.subscribe(resource.EndpointType, names[:10]...)
			first.waitHolds(resource.EndpointType, names[:10]...)

			f := &fleet{t: t, clients: []*adsClient{newADSClient(t, conn, variant, "second", "", nil)}}
			f.subscribe(resource.EndpointType, names...)
			f.wantOneResponse(f.recvChange(), resource.EndpointType, revisions(names, 1))
		})
	}
}

// A burst of clients on a cold relay, each subscribing at once to its own
// window of names overlapping its neighbours' (as Envoys of different
// services do): the relay asks the origin for each name once, in requests
// that split a client's window in pieces, yet every client gets its window
// in exactly one response.
func TestSyncColdBurstOneResponsePerClient(t *testing.T) {
	const clients, conns, total, window = 200, 4, 100, 20
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			o := newGCPOrigin(t)
			names := endpointNames("burst", total)
			o.setAll(resource.EndpointType, clas(revisions(names, 1)))
			r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
			f := newFleet(t, r.XDSAddr(), variant, clients, conns)
			windows := make([][]string, clients)
			for i, c := range f.clients {
				for j := range window {
					windows[i] = append(windows[i], names[(i/2+j)%total])
				}
				c.subscribe(resource.EndpointType, windows[i]...)
			}
			got := f.recvChange()
			bad, example := 0, ""
			for i, rs := range got {
				want := map[string]int64{}
				for _, n := range windows[i] {
					want[n] = 1
				}
				if len(rs) != 1 || !maps.Equal(want, carried(rs[0])) {
					if bad == 0 {
						example = fmt.Sprintf("%s got %s", f.clients[i].name, describe(rs))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d clients did not get their window of %d in exactly one response\n"+
					"responses per client (responses:clients): %v\ne.g. %s",
					bad, clients, window, histogram(got, func(rs []received) int { return len(rs) }), example)
			}
		})
	}
}
