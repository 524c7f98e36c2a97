package delivery

import (
	"fmt"
	"testing"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

// viewers are n clients node-0 ... of cluster.
func viewers(n int, cluster string) []cache.Viewer {
	out := make([]cache.Viewer, n)
	for i := range out {
		out[i] = cache.ViewerOf(fmt.Sprintf("node-%d", i), cluster)
	}
	return out
}

// Wave membership: by node cluster (a pattern), by share of the hash
// range (the shares' slices follow each other), the first wave that holds
// a client is its; the same node id is in the same wave whatever else is
// connected; a wave of a share no client hashes into takes one.
func TestWavePlan(t *testing.T) {
	fleet := append(viewers(1000, "prod"), viewers(20, "canary-eu")...)
	s := config.Delivery{Waves: []config.Wave{{NodeClusters: []string{"canary-*"}}, {Share: 0.1}, {Share: 0.3}}}
	p := newWavePlan(s, fleet)
	count := make([]int, 4)
	for _, v := range fleet[:1000] {
		count[p.waveOf(v)]++
	}
	if count[0] != 0 || count[1] < 70 || count[1] > 130 || count[2] < 250 || count[2] > 350 || count[3] < 550 {
		t.Errorf("1000 prod clients by wave %v, want none in the canary wave, about 100, 300 and 600", count)
	}
	for _, v := range fleet[1000:] {
		if w := p.waveOf(v); w != 0 {
			t.Errorf("%s of cluster canary-eu is in wave %d, want 0", v.NodeID, w+1)
		}
	}
	alone := newWavePlan(s, fleet[:3])
	for _, v := range fleet[:3] {
		if got, want := alone.waveOf(v), p.waveOf(v); got != want && got != 1 {
			t.Errorf("%s: wave %d among 3 clients, %d among 1020", v.NodeID, got, want)
		}
	}

	tiny := config.Delivery{Waves: []config.Wave{{Share: 0.001}, {Share: 0.001}}}
	few := viewers(10, "prod")
	tp := newWavePlan(tiny, few)
	in := make([]int, 3)
	for _, v := range few {
		in[tp.waveOf(v)]++
	}
	if in[0] != 1 || in[1] != 1 || in[2] != 8 {
		t.Errorf("two 0.1%% waves of 10 clients hold %v, want one client each, 8 left", in)
	}
	if open := tp.opened(1); !open.Admits(few[0]) && tp.waveOf(few[0]) == 0 {
		t.Errorf("wave 1 open does not admit its client")
	}
	empty := newWavePlan(tiny, nil)
	if w := empty.waveOf(few[0]); w < 0 || w > 2 {
		t.Errorf("a plan cut from no client puts a client in wave %d", w)
	}
}
