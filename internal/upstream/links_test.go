package upstream

import (
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestReserveLink: an authority's links, open or with a place kept, are
// at most the limit asked for; a link already open, or kept a place, is
// always admitted; the Subscribe that opens a link takes its place (no
// second one); the idle sweep gives back the places no Subscribe took and
// those of the links it closes; UnreserveLink gives one back at once.
func TestReserveLink(t *testing.T) {
	c := cache.New(cache.Options{})
	t.Cleanup(c.Close)
	m, err := New(Options{
		Authorities:      []Authority{{Name: "a", Origins: []string{"127.0.0.1:1"}}},
		Backoff:          Backoff{Initial: time.Hour, Max: time.Hour, Multiplier: 2},
		ConnectTimeout:   time.Second,
		FailbackInterval: time.Hour,
		MaxRequestSize:   1 << 20,
		IdleTimeout:      time.Hour, // swept by hand below
		ResponseTimeout:  time.Second,
		Cache:            c,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	group := func(g string) cache.LinkID { return cache.LinkID{Authority: "a", Group: g} }
	reserve := func(g string, max int, wantOpened, wantOK bool) {
		t.Helper()
		if opened, ok := m.ReserveLink(group(g), max); opened != wantOpened || ok != wantOK {
			t.Errorf("ReserveLink(%s, %d) = %v, %v; want %v, %v", g, max, opened, ok, wantOpened, wantOK)
		}
	}
	reserve("g1", 2, true, true)
	reserve("g2", 2, true, true)
	reserve("g3", 2, false, false) // the authority has 2
	reserve("g1", 2, false, true)  // kept already
	reserve("g1", 0, false, true)  // kept: no new place needed
	m.Subscribe(group("g1"), nil, resource.ClusterType, []string{"c1"})
	reserve("g3", 2, false, false) // g1's link took its place, not one more
	reserve("g1", 0, false, true)  // open
	if opened, ok := m.ReserveLink(cache.LinkID{Authority: "unknown"}, 0); opened || !ok {
		t.Errorf("ReserveLink of an unknown authority = %v, %v; want nothing to open", opened, ok)
	}
	m.closeIdle()
	m.closeIdle() // g2 was never subscribed, g1 is watched by nobody
	reserve("g3", 2, true, true)
	reserve("g4", 2, true, true)
	reserve("g5", 2, false, false)
	m.UnreserveLink(group("g4")) // its request was refused
	reserve("g5", 2, true, true)
}
