package downstream

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// testSendLimit is the send limit of these tests: 64 KiB, the gRPC server's
// and the Server's alike, as the relay sets both.
const testSendLimit = 64 << 10

// newLimitedEnv is newEnv with the send limit at testSendLimit.
func newLimitedEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, 0, grpc.MaxSendMsgSize(testSendLimit))
	e.srv.maxSend = testSendLimit // before any stream, as New sets it
	return e
}

// bigRes is a resource of typeURL named name taking about size bytes,
// its content tagged with rev.
func bigRes(typeURL, name, rev string, size int) *cache.Resource {
	return res(typeURL, name, rev+strings.Repeat("x", size))
}

// putAll stores resources of about size bytes under names, in one change.
func (e *env) putAll(typeURL string, names []string, rev string, size int) {
	e.t.Helper()
	u := cache.Update{TypeURL: typeURL}
	for _, n := range names {
		u.Link = key(typeURL, n).Link
		u.Resources = append(u.Resources, bigRes(typeURL, n, rev, size))
	}
	e.cache.Apply(u)
}

// splitClient is one client of a test of the send limit: delta or SotW,
// ACKing every response, checking that none is over the limit.
type splitClient struct {
	t     *testing.T
	d     *deltaStreamC
	s     *sotwStreamC
	names []string
}

func newSplitClient(t *testing.T, e *env, variant xdstype.Variant, typeURL string, names []string) *splitClient {
	c := &splitClient{t: t, names: names}
	if variant == xdstype.Delta {
		c.d = e.delta()
		c.d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: typeURL, ResourceNamesSubscribe: names})
	} else {
		c.s = e.sotw()
		c.s.Send(&discoveryv3.DiscoveryRequest{Node: testNode, TypeUrl: typeURL, ResourceNames: names})
	}
	return c
}

// recv takes one response, ACKs it and returns the names of its resources
// with their content's tag, and its resource errors by name.
func (c *splitClient) recv() (got map[string]string, errs map[string]codes.Code) {
	c.t.Helper()
	var m proto.Message
	got, errs = map[string]string{}, map[string]codes.Code{}
	var rerrs []*discoveryv3.ResourceError
	if c.d != nil {
		r := c.d.Recv()
		m, rerrs = r, r.GetResourceErrors()
		for _, x := range r.GetResources() {
			_, got[x.GetName()] = tagOf(c.t, x.GetResource())
		}
		c.d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	} else {
		r := c.s.Recv()
		m, rerrs = r, r.GetResourceErrors()
		for _, a := range r.GetResources() {
			n, tag := tagOf(c.t, a)
			got[n] = tag
		}
		c.s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: c.names})
	}
	if n := proto.Size(m); n > testSendLimit {
		c.t.Fatalf("a response of %d bytes, over the %d-byte send limit", n, testSendLimit)
	}
	for _, re := range rerrs {
		errs[re.GetResourceName().GetName()] = codes.Code(re.GetErrorDetail().GetCode())
	}
	return got, errs
}

// recvAll receives until the client holds want (name → tag) and returns
// how many responses that took.
func (c *splitClient) recvAll(want map[string]string) int {
	c.t.Helper()
	held, n := map[string]string{}, 0
	for !maps.Equal(held, want) {
		got, _ := c.recv()
		n++
		for k, v := range got {
			held[k] = v
		}
	}
	return n
}

func (c *splitClient) none() {
	if c.d != nil {
		c.d.None()
	} else {
		c.s.None()
	}
}

// tagOf returns the name of a test body (body) and the revision tag
// bigRes put in it, the filler cut off.
func tagOf(t *testing.T, a *anypb.Any) (name, tag string) {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	switch m := m.(type) {
	case *endpointv3.ClusterLoadAssignment:
		name, tag = m.GetClusterName(), m.GetEndpoints()[0].GetLocality().GetZone()
	case *listenerv3.Listener:
		name, tag = m.GetName(), m.GetStatPrefix()
	default:
		t.Fatalf("a body of type %s", a.GetTypeUrl())
	}
	return name, strings.TrimRight(tag, "x")
}

// TestSplitOverSendLimit: a response whose resources would take it past
// the send limit is sent as several, each within it, and the client gets
// every name: on a new subscription (the general path) and on one origin
// change bringing them all (the fan-out fast path's case), over both
// variants. One that fits stays one response.
func TestSplitOverSendLimit(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e := newLimitedEnv(t)
			var names []string
			for i := range 10 {
				names = append(names, xdstp(edsType, fmt.Sprintf("big-%d", i)))
			}
			e.putAll(edsType, names, "r1", 20<<10) // 200 KiB in all
			c := newSplitClient(t, e, variant, edsType, names)
			want := func(tag string) map[string]string {
				out := map[string]string{}
				for _, n := range names {
					out[n] = tag
				}
				return out
			}
			if n := c.recvAll(want("r1")); n < 4 {
				t.Errorf("200 KiB under a 64 KiB limit came in %d responses, want at least 4", n)
			}
			e.putAll(edsType, names, "r2", 20<<10)
			if n := c.recvAll(want("r2")); n < 4 {
				t.Errorf("an origin change of 200 KiB came in %d responses, want at least 4", n)
			}
			e.putAll(edsType, names[:2], "r3", 1<<10)
			if got, _ := c.recv(); len(got) != 2 {
				t.Errorf("a change that fits came as %v, want both names in one response", got)
			}
			c.none()
			if got := testutil.ToFloat64(e.srv.m.splitResponses.WithLabelValues(typeLabel(edsType))); got != 2 {
				t.Errorf("xds_relay_downstream_split_responses_total = %v, want 2", got)
			}
		})
	}
}

// TestResourceLargerThanSendLimit: a resource that cannot fit in any
// response is left out, the client told in resource_errors
// (RESOURCE_EXHAUSTED) and the rest sent; the stream goes on, and the
// resource is sent once a revision of it fits.
func TestResourceLargerThanSendLimit(t *testing.T) {
	for _, variant := range []xdstype.Variant{xdstype.Delta, xdstype.SotW} {
		t.Run(string(variant), func(t *testing.T) {
			e := newLimitedEnv(t)
			small, big := xdstp(edsType, "small"), xdstp(edsType, "big")
			e.cache.set(key(edsType, small), bigRes(edsType, small, "s1", 10))
			e.cache.set(key(edsType, big), bigRes(edsType, big, "b1", 2*testSendLimit))
			c := newSplitClient(t, e, variant, edsType, []string{small, big})
			got, errs := c.recv()
			if !maps.Equal(got, map[string]string{small: "s1"}) || errs[big] != codes.ResourceExhausted {
				t.Fatalf("got %v with errors %v, want %s alone and RESOURCE_EXHAUSTED for %s", got, errs, small, big)
			}
			c.none()
			if n := testutil.ToFloat64(e.srv.m.oversize.WithLabelValues(typeLabel(edsType), oversizeResource)); n < 1 {
				t.Errorf("xds_relay_downstream_oversize_total{reason=resource} = %v, want at least 1", n)
			}
			e.cache.set(key(edsType, big), bigRes(edsType, big, "b2", 10))
			if got, _ := c.recv(); !maps.Equal(got, map[string]string{big: "b2"}) {
				t.Fatalf("after it shrank: got %v, want %s", got, big)
			}
		})
	}
}

// TestFullStateOverSendLimit: a SotW state-of-the-world response (LDS)
// over the send limit cannot be split: it is not sent, the stream goes on,
// and the state goes out once it fits.
func TestFullStateOverSendLimit(t *testing.T) {
	e := newLimitedEnv(t)
	var names []string
	for i := range 4 {
		n := xdstp(ldsType, fmt.Sprintf("l-%d", i))
		names = append(names, n)
		e.cache.set(key(ldsType, n), bigRes(ldsType, n, "r1", 20<<10)) // 80 KiB in all
	}
	c := newSplitClient(t, e, xdstype.SotW, ldsType, names)
	c.none()
	if n := testutil.ToFloat64(e.srv.m.oversize.WithLabelValues(typeLabel(ldsType), oversizeFullState)); n != 1 {
		t.Errorf("xds_relay_downstream_oversize_total{reason=full_state} = %v, want 1", n)
	}
	e.cache.remove(key(ldsType, names[0])) // 60 KiB left
	want := map[string]string{names[1]: "r1", names[2]: "r1", names[3]: "r1"}
	if got, _ := c.recv(); !maps.Equal(got, want) {
		t.Fatalf("once it fits: got %v, want %v", got, want)
	}
}
