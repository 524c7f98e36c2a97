package downstream

import (
	"fmt"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// One request, one response: what the relay knows while it applies a
// request goes out in a single response per type.
//
// The cache hook makes that deterministic. Watch is made key by key, and
// each resource becomes known just before its key is watched (as if it
// arrived from the origin at that moment). After the first key the hook
// waits until the server has looked up every subscribed name (or xdstest.QuietPeriod
// passes). Before the session held its writer back while handling a
// request, the first Notify woke the writer, which looked everything up
// while the rest was still unknown, and sent the first resource alone; the
// others followed in later responses. Now the writer runs only once the
// request is applied, so the hook times out and one response carries all.
func TestOneRequestOneResponse(t *testing.T) {
	const n = 6
	tests := []struct {
		name  string
		check func(t *testing.T, e *env, names []string, rs []*cache.Resource)
	}{
		{"delta", func(t *testing.T, e *env, names []string, rs []*cache.Resource) {
			c := e.delta()
			c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNamesSubscribe: names})
			want := deltaResp(edsType, nil)
			for i, name := range names {
				want.Resources = append(want.Resources, dres(name, rs[i]))
			}
			checkDelta(t, want, c.Recv())
			c.None()
		}},
		{"sotw", func(t *testing.T, e *env, names []string, rs []*cache.Resource) {
			c := e.sotw()
			c.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: edsType, ResourceNames: names})
			var bodies []*anypb.Any
			for _, r := range rs {
				bodies = append(bodies, r.Body)
			}
			checkSotW(t, sotwResp(edsType, "1", bodies...), c.Recv())
			c.None()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			names := make([]string, n)
			rs := make([]*cache.Resource, n)
			byKey := make(map[cache.Key]int, n)
			for i := range names {
				names[i] = xdstp(edsType, fmt.Sprintf("e%d", i))
				rs[i] = res(edsType, names[i], "1")
				byKey[key(edsType, names[i])] = i
			}
			looked := make(chan struct{}, 2*n)
			e.cache.setHooks(cacheHooks{
				beforeWatch: func(i int, k cache.Key) {
					if i == 1 {
						// Give a writer that runs mid-request the time to
						// look up every name (it must not).
						deadline := time.After(xdstest.QuietPeriod)
					wait:
						for range n {
							select {
							case <-looked:
							case <-deadline:
								break wait
							}
						}
					}
					e.cache.set(k, rs[byKey[k]])
				},
				afterGet: func(cache.Key) {
					select {
					case looked <- struct{}{}:
					default:
					}
				},
			})
			tc.check(t, e, names, rs)
		})
	}
}
