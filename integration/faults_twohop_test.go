package integration

import (
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	relayproc "github.com/xds-relay/xds-relay/internal/relay"
)

// The fault suite across two hops (issue #11): client → edge relay →
// central relay → go-control-plane origin (tiers_test.go), each scenario
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
// waits until every one holds what the origin serves.
func (c *twoHops) connect(t *testing.T, perEdge, conns int) *fleet {
	t.Helper()
	var fs []*fleet
	for _, e := range c.edges {
		fs = append(fs, newFleet(t, e.XDSAddr(), "mixed", perEdge, conns))
	}
	f := join(fs...)
	f.subscribe(resource.EndpointType, c.names...)
	f.waitRevisions(c.revs)
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

// originStreams is how many streams the origin has opened so far.
func (c *twoHops) originStreams() (delta, sotw int) {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	return c.o.deltaOpens, c.o.sotwOpens
}

// forEachHop runs test over a delta and over a SotW edge → central hop.
func forEachHop(t *testing.T, test func(t *testing.T, hop string)) {
	for _, hop := range []string{config.TransportDelta, config.TransportSotW} {
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
		f.settle()

		from := c.o.deltaRequests()
		streams, _ := c.originStreams()
		misses := c.edgesMetric("xds_relay_cache_misses_total", claType...)
		lost := c.edgesMetric("xds_relay_upstream_reconnects_total", "authority", tierAuthority)
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

		delta, sotw := c.originStreams()
		if delta-streams != 1 || sotw != 0 {
			t.Errorf("origin saw %d new delta and %d SotW streams after it returned, want 1 delta stream for %d clients behind %d edges",
				delta-streams, sotw, len(everyone.clients), len(c.edges))
		}
		if got := c.edgesMetric("xds_relay_upstream_reconnects_total", "authority", tierAuthority) - lost; got != 0 {
			t.Errorf("edges' upstream streams lost or refused while the origin was down: %v, want none (the central relay stayed up)", got)
		}
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
		f.settle()

		addr := c.central.XDSAddr()
		lost := make([]float64, len(c.edges))
		for i, e := range c.edges {
			lost[i] = relayMetric(t, e, "xds_relay_upstream_reconnects_total", "authority", tierAuthority)
		}
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

		retries := c.edgesMetric("xds_relay_upstream_reconnects_total", "authority", tierAuthority)
		for _, n := range lost {
			retries -= n
		}
		sent := relayMetric(t, c.central, "xds_relay_downstream_resources_sent_total", claType...)
		t.Logf("%s hop: edges counted %v lost streams and refused attempts; the new central relay sent the edges %v resources", hop, retries, sent)
		if hop == config.TransportDelta && sent != float64(len(c.edges)) {
			t.Errorf("new central relay sent the edges %v resources, want %d (the changed one each): the edges did not resume with initial_resource_versions", sent, len(c.edges))
		}
	})
}
