package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// dsEndpoints is the xdstp name of ClusterLoadAssignment id under
// dsAuthority.
func dsEndpoints(id string) string {
	return xdstpName(dsAuthority, "envoy.config.endpoint.v3.ClusterLoadAssignment", id)
}

// endpointNames is n endpoint names prefix-0 ... prefix-(n-1) under
// dsAuthority.
func endpointNames(prefix string, n int) []string {
	return endpointNamesIn(dsAuthority, prefix, n)
}

// endpointNamesIn is endpointNames under authority.
func endpointNamesIn(authority, prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = xdstpName(authority, "envoy.config.endpoint.v3.ClusterLoadAssignment", fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// cla is a ClusterLoadAssignment whose revision is its overprovisioning
// factor: equal revisions, equal bytes.
func cla(name string, rev uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Policy:      &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(rev)},
	}
}

// revisions is names at their revision: name → revision.
func revisions(names []string, rev uint32) map[string]uint32 {
	out := make(map[string]uint32, len(names))
	for _, n := range names {
		out[n] = rev
	}
	return out
}

// clas is the origin's body of each revision, by name.
func clas(revs map[string]uint32) map[string]types.Resource {
	out := make(map[string]types.Resource, len(revs))
	for n, r := range revs {
		out[n] = cla(n, r)
	}
	return out
}

// claRev is the revision a client got in x (-1: not a ClusterLoadAssignment).
func claRev(x *discoveryv3.Resource) int64 {
	c := &endpointv3.ClusterLoadAssignment{}
	if x.GetResource().UnmarshalTo(c) != nil {
		return -1
	}
	return int64(c.GetPolicy().GetOverprovisioningFactor().GetValue())
}

// fleet is many adsClients driven from the test goroutine, their waits
// sharing one deadline.
type fleet struct {
	t       *testing.T
	clients []*adsClient
}

// newFleet opens n clients of variant ("delta", "sotw", or "mixed": delta
// and SotW in turn) to addr, spread over conns gRPC connections.
func newFleet(t *testing.T, addr, variant string, n, conns int) *fleet {
	t.Helper()
	cs := make([]*grpc.ClientConn, conns)
	for i := range cs {
		cs[i] = dial(t, addr)
	}
	f := &fleet{t: t, clients: make([]*adsClient, n)}
	for i := range f.clients {
		v := variant
		if variant == "mixed" {
			v = [...]string{"delta", "sotw"}[i%2]
		}
		f.clients[i] = newADSClient(t, cs[i%conns], v, fmt.Sprintf("%s-%d", v, i), "", nil)
	}
	return f
}

// join is one fleet of the clients of fs, in order.
func join(fs ...*fleet) *fleet {
	out := &fleet{t: fs[0].t}
	for _, f := range fs {
		out.clients = append(out.clients, f.clients...)
	}
	return out
}

func (f *fleet) subscribe(typeURL string, names ...string) {
	f.t.Helper()
	for _, c := range f.clients {
		c.subscribe(typeURL, names...)
	}
}

// timeout bounds a wait of the whole fleet: xdstest.WaitTimeout, and 10 ms
// more per client, because a 2000-client fleet syncing on a loaded 2-core
// machine can outlast the one-event deadline without anything being stuck.
func (f *fleet) timeout() time.Duration {
	return xdstest.WaitTimeout + time.Duration(len(f.clients))*10*time.Millisecond
}

// waitHolds receives (and ACKs) until every client holds exactly names of
// typeURL, all within f.timeout().
func (f *fleet) waitHolds(typeURL string, names ...string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout())
	defer cancel()
	for _, c := range f.clients {
		c.waitHoldsUntil(ctx.Done(), typeURL, names...)
	}
}

// waitRevisions receives (and ACKs) until every client holds exactly the
// ClusterLoadAssignments revs (name → revision), all within f.timeout().
func (f *fleet) waitRevisions(revs map[string]uint32) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout())
	defer cancel()
	holds := func(c *adsClient) bool {
		h := c.held[resource.EndpointType]
		if len(h) != len(revs) {
			return false
		}
		for n, r := range revs {
			if claRev(h[n]) != int64(r) {
				return false
			}
		}
		return true
	}
	for _, c := range f.clients {
		for !holds(c) {
			if _, ok := c.recvOne(ctx.Done()); !ok {
				got := map[string]int64{}
				for n, x := range c.held[resource.EndpointType] {
					got[n] = claRev(x)
				}
				f.t.Fatalf("%s holds revisions %v after %v, want %v", c.name, got, f.timeout(), revs)
			}
		}
	}
}

// wantStreamsOpen checks that no client's stream has ended.
func (f *fleet) wantStreamsOpen() {
	f.t.Helper()
	ended, example := 0, ""
	for _, c := range f.clients {
		var errc <-chan error
		if c.delta != nil {
			errc = c.delta.Errors()
		} else {
			errc = c.sotw.Errors()
		}
		select {
		case err := <-errc:
			if ended == 0 {
				example = fmt.Sprintf("%s: %v", c.name, err)
			}
			ended++
		default:
		}
	}
	if ended > 0 {
		f.t.Errorf("%d of %d client streams ended, e.g. %s", ended, len(f.clients), example)
	}
}

// settle receives (and ACKs) until no client has received anything for
// xdstest.QuietPeriod, and returns what each client received meanwhile. Still
// receiving after f.timeout() fails the test.
func (f *fleet) settle() [][]received {
	f.t.Helper()
	got := make([][]received, len(f.clients))
	limit := time.Now().Add(f.timeout())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), xdstest.QuietPeriod)
		n := 0
		for i, c := range f.clients {
			for {
				r, ok := c.recvOne(ctx.Done())
				if !ok {
					break
				}
				got[i] = append(got[i], r)
				n++
			}
		}
		cancel()
		if n == 0 {
			return got
		}
		if time.Now().After(limit) {
			f.t.Fatalf("clients still receiving after %v", f.timeout())
		}
	}
}

// recvChange waits until every client has received a response (all within
// f.timeout()), then settles, and returns what each client received.
func (f *fleet) recvChange() [][]received {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout())
	defer cancel()
	got := make([][]received, len(f.clients))
	for i, c := range f.clients {
		r, ok := c.recvOne(ctx.Done())
		if !ok {
			f.t.Fatalf("%s: no response within %v (%d of %d clients got one)", c.name, f.timeout(), i, len(f.clients))
		}
		got[i] = []received{r}
	}
	for i, more := range f.settle() {
		got[i] = append(got[i], more...)
	}
	return got
}

// carried is what a response carried: name → revision (removed: -2).
func carried(r received) map[string]int64 {
	out := make(map[string]int64, len(r.resources)+len(r.removed))
	for _, x := range r.resources {
		out[x.GetName()] = claRev(x)
	}
	for _, n := range r.removed {
		out[n] = -2
	}
	return out
}

// describe is one client's responses for failure messages: the revision
// of each resource each carried (removed: -2) by the last segment of its
// name, or for many resources how many carried each revision.
func describe(rs []received) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		c := carried(r)
		if len(c) > 10 {
			byRev := map[int64]int{}
			for _, rev := range c {
				byRev[rev]++
			}
			parts[i] = fmt.Sprintf("%d resources, by revision (revision:resources) %v", len(c), byRev)
			continue
		}
		short := map[string]int64{}
		for n, rev := range c {
			short[n[strings.LastIndex(n, "/")+1:]] = rev
		}
		parts[i] = fmt.Sprintf("%d resources %v", len(c), short)
	}
	return fmt.Sprintf("%d responses [%s]", len(rs), strings.Join(parts, "; "))
}

// histogram counts clients by an integer: value → clients (fmt prints a
// map sorted by key).
func histogram(got [][]received, value func([]received) int) map[int]int {
	h := map[int]int{}
	for _, rs := range got {
		h[value(rs)]++
	}
	return h
}

// wantOneResponse checks that every client received exactly one response
// after a change, carrying exactly want (name → revision), and holds it.
// Its failure message gives the distribution of responses per client and
// of resources in their first response.
func (f *fleet) wantOneResponse(got [][]received, typeURL string, want map[string]uint32) {
	f.t.Helper()
	wantCarried := make(map[string]int64, len(want))
	for n, r := range want {
		wantCarried[n] = int64(r)
	}
	bad, example := 0, ""
	for i, rs := range got {
		c := f.clients[i]
		ok := len(rs) == 1 && rs[0].typeURL == typeURL && maps.Equal(wantCarried, carried(rs[0]))
		for n, r := range wantCarried {
			if claRev(c.held[typeURL][n]) != r {
				ok = false
			}
		}
		if !ok {
			if bad == 0 {
				example = fmt.Sprintf("%s got %s", c.name, describe(rs))
			}
			bad++
		}
	}
	if bad == 0 {
		return
	}
	f.t.Errorf("one origin change of %d resources: %d of %d clients did not get exactly one response carrying exactly them\n"+
		"responses per client (responses:clients): %v\n"+
		"resources in a client's first response (resources:clients): %v\n"+
		"e.g. %s",
		len(want), bad, len(got),
		histogram(got, func(rs []received) int { return len(rs) }),
		histogram(got, func(rs []received) int {
			if len(rs) == 0 {
				return 0
			}
			return len(carried(rs[0]))
		}),
		example)
}

// wantNothingResent checks that no client received a resource or removal
// while nothing changed (responses carrying nothing are allowed).
func (f *fleet) wantNothingResent(got [][]received, when string) {
	f.t.Helper()
	bad, example := 0, ""
	for i, rs := range got {
		n := 0
		for _, r := range rs {
			n += len(carried(r))
		}
		if n > 0 {
			if bad == 0 {
				example = fmt.Sprintf("%s got %s", f.clients[i].name, describe(rs))
			}
			bad++
		}
	}
	if bad == 0 {
		return
	}
	f.t.Errorf("%s, with nothing changed: %d of %d clients were resent resources they hold\n"+
		"resources resent per client (resources:clients): %v\n"+
		"e.g. %s",
		when, bad, len(got),
		histogram(got, func(rs []received) int {
			n := 0
			for _, r := range rs {
				n += len(carried(r))
			}
			return n
		}),
		example)
}

// TestFanoutOneResponsePerChange: one origin change of every resource a
// thousand clients watch reaches each of them as one response carrying
// all of it, never as a response per resource (issue #9).
func TestFanoutOneResponsePerChange(t *testing.T) {
	const clients, conns, resources = 1000, 10, 10
	for _, variant := range []string{"delta", "sotw"} {
		t.Run(variant, func(t *testing.T) {
			start := time.Now()
			o := newGCPOrigin(t)
			names := endpointNames("fan", resources)
			o.setAll(resource.EndpointType, clas(revisions(names, 1)))
			// At debug level the relay logs every response it sends.
			r := startRelay(t, func(cfg *config.Config) { cfg.Log.Level = config.LogInfo }, o.addr)
			f := newFleet(t, r.XDSAddr(), variant, clients, conns)
			f.subscribe(resource.EndpointType, names...)
			f.waitHolds(resource.EndpointType, names...)
			f.settle()
			t.Logf("%d %s clients synced in %v", clients, variant, time.Since(start))

			typ := []string{"type", "envoy.config.endpoint.v3.ClusterLoadAssignment"}
			shared0 := relayMetric(t, r, "xds_relay_downstream_shared_responses_total", typ...)
			fanout0 := relayMetric(t, r, "xds_relay_fanout_duration_seconds", typ...)

			o.setAll(resource.EndpointType, clas(revisions(names, 2)))
			f.wantOneResponse(f.recvChange(), resource.EndpointType, revisions(names, 2))

			// Every client took the fast path: one encoding of the change,
			// shared. The change was measured once, after the last send.
			if got := relayMetric(t, r, "xds_relay_downstream_shared_responses_total", typ...) - shared0; got != clients {
				t.Errorf("responses from the shared encoding: %v, want %d (every client)", got, clients)
			}
			waitRelayMetric(t, r, "the change's fan-out measured", func(v float64) bool { return v >= fanout0+1 },
				"xds_relay_fanout_duration_seconds", typ...)
			if got := relayMetric(t, r, "xds_relay_fanout_duration_seconds", typ...) - fanout0; got != 1 {
				t.Errorf("fan-out duration samples for one change: %v, want 1", got)
			}
		})
	}
}
