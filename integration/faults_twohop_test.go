package integration

import (
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The fault suite across two hops (issue #11): client → edge relay →
// central relay → go-control-plane origin (upstream_tiers_test.go), each scenario
// over a delta and over a SotW hop between edge and central. What the
// single-hop suite (faults_test.go) proves of one relay holds of the
// chain, and the origin serves one stream per authority whatever the
// number of edges and clients.

// twoHops is a chain of edge relays in front of one central relay in
// front of origin o, serving ten ClusterLoadAssignments under
// tierAuthority.
type twoHops struct {
	t       *testing.T
	hop     string // the edge → central transport
	o       *gcpOrigin
	central *relayproc.Relay
	edges   []*relayproc.Relay
	names   []string
	revs    map[string]uint32 // what the origin serves: name → revision
}

// newTwoHops sets names at revision 1 at o and starts the central relay
// and edges edge relays in front of it over hop.
func newTwoHops(t *testing.T, o *gcpOrigin, hop, prefix string, edges int) *twoHops {
	t.Helper()
	c := &twoHops{t: t, hop: hop, o: o, names: endpointNamesIn(tierAuthority, prefix, 10)}
	c.revs = revisions(c.names, 1)
	o.setAll(resource.EndpointType, clas(c.revs))
	c.central = centralRelay(t, o)
	for range edges {
		c.edges = append(c.edges, edgeRelay(t, c.central.XDSAddr(), hop))
	}
	return c
}

// connect opens perEdge clients (delta and SotW in turn, over conns
// connections) on every edge, subscribes them to the chain's names and
// waits until every one holds what the origin serves and nothing more
// arrives.
func (c *twoHops) connect(t *testing.T, perEdge, conns int) *fleet {
	t.Helper()
	var fs []*fleet
	for _, e := range c.edges {
		fs = append(fs, newFleet(t, e.XDSAddr(), "mixed", perEdge, conns))
	}
	f := join(fs...)
	f.subscribe(resource.EndpointType, c.names...)
	f.waitRevisions(c.revs)
	f.settle()
	return f
}

// change sets names[i] at revision rev at the origin (one origin change).
func (c *twoHops) change(i int, rev uint32) map[string]uint32 {
	c.revs[c.names[i]] = rev
	one := map[string]uint32{c.names[i]: rev}
	c.o.setAll(resource.EndpointType, clas(one))
	return one
}

// edgesMetric is the sum over the edges of a relay metric.
func (c *twoHops) edgesMetric(name string, labels ...string) float64 {
	c.t.Helper()
	sum := 0.0
	for _, e := range c.edges {
		sum += relayMetric(c.t, e, name, labels...)
	}
	return sum
}

// edgeReconnects is each edge's count of lost upstream streams and
// refused attempts.
func (c *twoHops) edgeReconnects() []float64 {
	c.t.Helper()
	out := make([]float64, len(c.edges))
	for i, e := range c.edges {
		out[i] = relayMetric(c.t, e, "xds_relay_upstream_reconnects_total", "authority", tierAuthority)
	}
	return out
}

// wantEdgeStreamsKept checks that no edge has lost an upstream stream or
// been refused one since it counted before (edgeReconnects).
func (c *twoHops) wantEdgeStreamsKept(before []float64, when string) {
	c.t.Helper()
	for i, n := range c.edgeReconnects() {
		if n != before[i] {
			c.t.Errorf("edge %d lost its stream to the central relay or was refused %v times %s, want never", i, n-before[i], when)
		}
	}
}

// forEachHop runs test over a delta and over a SotW edge → central hop.
func forEachHop(t *testing.T, test func(t *testing.T, hop string)) {
	for _, hop := range []string{xdstype.TransportDelta, xdstype.TransportSotW} {
		t.Run(hop, func(t *testing.T) { test(t, hop) })
	}
}

// TestTwoHopOriginKilled: 2 edges × 50 clients hold ten resources when
// the origin is killed. No client stream ends and nothing is resent; 2 × 5
// new clients are served from their edge's cache (no cache miss at an
// edge); the origin comes back at its address, and one change there
// reaches all 110 clients as exactly one response each. The origin sees
// exactly one new stream after it returns (the central relay's), and the
// edges' own upstream streams never break.
func TestTwoHopOriginKilled(t *testing.T) {
	forEachHop(t, func(t *testing.T, hop string) {
		c := newTwoHops(t, newGCPOrigin(t), hop, "killed", 2)
		f := c.connect(t, 50, 2)

		from := c.o.deltaRequests()
		streams, _ := c.o.streams()
		misses := c.edgesMetric("xds_relay_cache_misses_total", claType...)
		lost := c.edgeReconnects()
		c.o.stop()
		f.wantNothingResent(f.settle(), "origin killed")

		newcomers := c.connect(t, 5, 1)
		if got := c.edgesMetric("xds_relay_cache_misses_total", claType...) - misses; got != 0 {
			t.Errorf("cache misses at the edges while the origin was down: %v, want none: new clients are served from the edge's cache", got)
		}

		c.o.restart()
		c.o.waitDeltaSubscribed(from, resource.EndpointType, c.names)
		everyone := join(f, newcomers)
		everyone.wantNothingResent(everyone.settle(), "origin back")
		changed := c.change(3, 2)
		everyone.wantOneResponse(everyone.recvChange(), resource.EndpointType, changed)
		everyone.waitRevisions(c.revs)
		everyone.wantStreamsOpen()

		delta, sotw := c.o.streams()
		if delta-streams != 1 || sotw != 0 {
			t.Errorf("origin saw %d new delta and %d SotW streams after it returned, want 1 delta stream for %d clients behind %d edges",
				delta-streams, sotw, len(everyone.clients), len(c.edges))
		}
		c.wantEdgeStreamsKept(lost, "while the origin was down")
	})
}

// TestTwoHopCentralRestart: the central relay is closed under 2 edges ×
// 50 clients and a new one starts at its address. Edge clients keep their
// streams and resources throughout and are resent nothing; the edges
// retry with backoff (reconnect attempts counted) and, once the new
// central relay serves, resume: a change the origin made while the
// central relay was down reaches every client as exactly one response
// carrying only it. Over a delta hop the edges resume with
// initial_resource_versions, so the new central relay sends each edge the
// changed resource alone.
func TestTwoHopCentralRestart(t *testing.T) {
	forEachHop(t, func(t *testing.T, hop string) {
		c := newTwoHops(t, newGCPOrigin(t), hop, "central", 2)
		f := c.connect(t, 50, 2)

		addr := c.central.XDSAddr()
		lost := c.edgeReconnects()
		if err := c.central.Close(); err != nil {
			t.Fatalf("central relay close: %v", err)
		}
		changed := c.change(3, 2)
		// Each edge loses its stream and is refused at least twice more.
		for i, e := range c.edges {
			waitRelayMetric(t, e, "edge retrying the central relay", func(v float64) bool { return v >= lost[i]+3 },
				"xds_relay_upstream_reconnects_total", "authority", tierAuthority)
		}
		f.wantNothingResent(f.settle(), "central relay down")
		f.wantStreamsOpen()

		c.central = centralRelay(t, c.o, func(cfg *config.Config) { cfg.Listen = addr })
		f.wantOneResponse(f.recvChange(), resource.EndpointType, changed)
		f.waitRevisions(c.revs)
		f.wantStreamsOpen()

		retries := 0.0
		for i, n := range c.edgeReconnects() {
			retries += n - lost[i]
		}
		sent := relayMetric(t, c.central, "xds_relay_downstream_resources_sent_total", claType...)
		t.Logf("%s hop: edges counted %v lost streams and refused attempts; the new central relay sent the edges %v resources", hop, retries, sent)
		if hop == xdstype.TransportDelta && sent != float64(len(c.edges)) {
			t.Errorf("new central relay sent the edges %v resources, want %d (the changed one each): the edges did not resume with initial_resource_versions", sent, len(c.edges))
		}
	})
}

// TestTwoHopReconnectStorm: 2 edges × 250 clients (delta and SotW, 4
// connections an edge) hold ten resources; their connections drop and as
// many clients connect again at once. Above the edges nothing is asked:
// the central relay receives no request, the origin no stream and no
// request, no edge loses its upstream stream and no subscription is a
// cache miss at an edge; every client is whole again, and the time that
// takes is logged.
func TestTwoHopReconnectStorm(t *testing.T) {
	const perEdge, conns = 250, 4
	forEachHop(t, func(t *testing.T, hop string) {
		c := newTwoHops(t, newGCPOrigin(t), hop, "storm", 2)
		// The first fleet's connections close when its subtest ends.
		if !t.Run("before", func(t *testing.T) { c.connect(t, perEdge, conns) }) {
			return
		}
		for _, e := range c.edges {
			waitStreamsGone(t, e) // the storm finds no client watching
		}
		before := c.above()
		lost := c.edgeReconnects()
		start := time.Now()
		f := c.connect(t, perEdge, conns)
		t.Logf("%s hop: reconnect storm at the edges: %d clients whole again in %v (settled); above the edges before it: %+v",
			hop, len(f.clients), time.Since(start), before)
		if after := c.above(); after != before {
			t.Errorf("during the storm, above the edges: %+v, before %+v, want no change", after, before)
		}
		c.wantEdgeStreamsKept(lost, "during the storm")
	})
}

// aboveEdges is what the edges have asked of the chain above them, and
// their cache misses, so far.
type aboveEdges struct {
	OriginStreams, OriginRequests int
	CentralRequests, EdgeMisses   float64
}

func (c *twoHops) above() aboveEdges {
	c.t.Helper()
	delta, sotw := c.o.streams()
	return aboveEdges{
		OriginStreams:   delta + sotw,
		OriginRequests:  c.o.deltaRequests() + c.o.sotwRequests(),
		CentralRequests: relayMetric(c.t, c.central, "xds_relay_downstream_requests_total", claType...),
		EdgeMisses:      c.edgesMetric("xds_relay_cache_misses_total", claType...),
	}
}

// TestTwoHopOriginFlapping: the origin behind the central relay goes down
// and comes back five times, each outage lasting two refused connection
// attempts, and changes one resource while it is down (the last time it
// deletes one). After each return every edge client holds the origin's
// state; at the end nothing is resent, no client stream ended, no edge
// lost its stream to the central relay, and the origin has served
// exactly one stream per return (one stream at the end). A deletion
// reaches every delta client, behind either hop: over a SotW hop the
// central relay says it with a NOT_FOUND resource error, which the edge
// takes as a removal. A SotW client is told the same way; the view of
// it here does not apply resource errors, so it keeps the revision.
func TestTwoHopOriginFlapping(t *testing.T) {
	const flaps = 5
	forEachHop(t, func(t *testing.T, hop string) {
		o, gate := newGatedOrigin(t)
		c := newTwoHops(t, o, hop, "flap", 2)
		f := c.connect(t, 20, 1)
		lost := c.edgeReconnects()
		for i := range flaps {
			from, reqs := gate.count(), o.deltaRequests()
			gate.down()
			last := i == flaps-1
			if last {
				o.del(resource.EndpointType, c.names[0])
			} else {
				c.change(i+1, uint32(i+2))
			}
			gate.waitRefused(from, 2)
			gate.up()
			o.waitDeltaSubscribed(reqs, resource.EndpointType, c.names)
			if !last {
				f.waitRevisions(c.revs)
				continue
			}
			deltas, sotws := f.byVariant()
			sotws.waitRevisions(c.revs)
			delete(c.revs, c.names[0])
			deltas.waitRevisions(c.revs)
		}
		f.wantNothingResent(f.settle(), "after the last flap")
		f.wantStreamsOpen()
		c.wantEdgeStreamsKept(lost, "while the origin flapped")
		if delta, sotw := c.o.streams(); delta != flaps+1 || sotw != 0 {
			t.Errorf("origin served %d delta and %d SotW streams over %d outages, want %d delta streams (one each time it came back)", delta, sotw, flaps, flaps+1)
		}
		if got := relayMetric(t, c.central, "xds_relay_upstream_streams", "authority", tierAuthority); got != 1 {
			t.Errorf("central relay's upstream streams at the end = %v, want 1", got)
		}
	})
}
