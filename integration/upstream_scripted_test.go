package integration

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// scriptedOrigin is a small ADS server on loopback whose responses the
// test sends one by one, and which hands the test every request; delta and
// SotW streams alike.
type scriptedOrigin struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	addr  string
	delta *scripted[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
	sotw  *scripted[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
}

func newScriptedOrigin(t testing.TB) *scriptedOrigin {
	t.Helper()
	o := &scriptedOrigin{
		delta: newScripted[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse](t, "delta"),
		sotw:  newScripted[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse](t, "SotW"),
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.addr = lis.Addr().String()
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, o)
	t.Cleanup(serveGRPC(gs, lis))
	return o
}

func (o *scriptedOrigin) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	return o.delta.serve(st)
}

func (o *scriptedOrigin) StreamAggregatedResources(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	return o.sotw.serve(st)
}

// send hands the delta stream a response to send.
func (o *scriptedOrigin) send(r *discoveryv3.DeltaDiscoveryResponse) { o.delta.send(r, r.GetNonce()) }

// next returns the next delta request that satisfies match.
func (o *scriptedOrigin) next(what string, match func(*discoveryv3.DeltaDiscoveryRequest) bool) *discoveryv3.DeltaDiscoveryRequest {
	return o.delta.next(what, match)
}

// sendSotW hands the SotW stream a response to send.
func (o *scriptedOrigin) sendSotW(r *discoveryv3.DiscoveryResponse) { o.sotw.send(r, r.GetNonce()) }

// nextSotW returns the next SotW request that satisfies match.
func (o *scriptedOrigin) nextSotW(what string, match func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	return o.sotw.next(what, match)
}

// scripted is one transport of a scriptedOrigin: every request its streams
// receive, and the responses the test hands them.
type scripted[Req, Resp any] struct {
	t         testing.TB
	transport string
	reqs      chan *Req
	resps     chan *Resp
}

func newScripted[Req, Resp any](t testing.TB, transport string) *scripted[Req, Resp] {
	return &scripted[Req, Resp]{t: t, transport: transport, reqs: make(chan *Req, 100), resps: make(chan *Resp)}
}

// serve runs one stream: its requests go to reqs, the responses the test
// sends go to the client.
func (s *scripted[Req, Resp]) serve(st grpc.BidiStreamingServer[Req, Resp]) error {
	// The receiver ends when the stream does (Recv fails once the handler
	// has returned).
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			select {
			case s.reqs <- r:
			case <-st.Context().Done():
				return
			}
		}
	}()
	for {
		select {
		case <-st.Context().Done():
			return nil
		case r := <-s.resps:
			if err := st.Send(r); err != nil {
				return err
			}
		}
	}
}

// send hands a stream response r (nonce is its nonce, for the failure
// message) to send.
func (s *scripted[Req, Resp]) send(r *Resp, nonce string) {
	s.t.Helper()
	select {
	case s.resps <- r:
	case <-time.After(xdstest.WaitTimeout):
		s.t.Fatalf("scripted origin: no %s stream to send nonce %q on", s.transport, nonce)
	}
}

// next returns the next request that satisfies match.
func (s *scripted[Req, Resp]) next(what string, match func(*Req) bool) *Req {
	s.t.Helper()
	deadline := time.NewTimer(xdstest.WaitTimeout)
	defer deadline.Stop()
	for {
		select {
		case r := <-s.reqs:
			if match(r) {
				return r
			}
		case <-deadline.C:
			s.t.Fatalf("scripted origin: timed out waiting for %s (%s)", what, s.transport)
		}
	}
}

func subscribes(typeURL, name string) func(*discoveryv3.DeltaDiscoveryRequest) bool {
	return func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		if r.GetTypeUrl() != typeURL {
			return false
		}
		for _, n := range r.GetResourceNamesSubscribe() {
			if n == name {
				return true
			}
		}
		return false
	}
}

func answers(nonce string) func(*discoveryv3.DeltaDiscoveryRequest) bool {
	return func(r *discoveryv3.DeltaDiscoveryRequest) bool { return r.GetResponseNonce() == nonce }
}

// TestUpstreamNACKDuplicateNames: a response that repeats a resource name
// is NACKed with an error_detail naming it, and the cache keeps the last
// good version; watchers hear nothing of it.
func TestUpstreamNACKDuplicateNames(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	o.next("subscription to c1", subscribes(resource.ClusterType, "c1"))

	good := mustAny(t, cluster("c1", 1))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1",
		Resources: []*discoveryv3.Resource{{Name: "c1", Version: "1", Resource: good}}})
	ack := o.next("ACK of n1", answers("n1"))
	if ack.GetErrorDetail() != nil {
		t.Fatalf("good response NACKed: %v", ack.GetErrorDetail())
	}
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)
	// Notify follows the cache update: wait for it before counting.
	w.waitFor(t, "c1 notified", func() bool { return w.count("c1") == 1 })
	notified := w.count("c1")

	bad := mustAny(t, cluster("c1", 2))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2",
		Resources: []*discoveryv3.Resource{{Name: "c1", Version: "2", Resource: bad}, {Name: "c1", Version: "2", Resource: bad}}})
	nack := o.next("NACK of n2", answers("n2"))
	if nack.GetErrorDetail() == nil {
		t.Fatalf("duplicate names ACKed")
	}
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, `"c1"`) || !strings.Contains(msg, "more than once") {
		t.Errorf("error_detail %q does not name the duplicate", msg)
	}
	read := r.c.Lookup(nil, cdsKey("c1"))
	got, st := read.Res, read.State
	if st != cache.StatePresent || got.OriginVersion != "1" {
		t.Fatalf("after NACK: %v version %q, want present version 1", st, versionOf(got))
	}
	if got := w.count("c1"); got != notified {
		t.Errorf("watcher notified %d more times by a rejected response", got-notified)
	}
	if got := metricValue(t, r, "xds_relay_upstream_nacks_total", "type", "envoy.config.cluster.v3.Cluster", "reason", "invalid"); got != 1 {
		t.Errorf("nacks_total = %v, want 1", got)
	}
}

const ldsPrefix = "xdstp://auth/envoy.config.listener.v3.Listener/"

func ldsKey(name string) cache.Key {
	c, err := cache.CanonicalName(name)
	if err != nil {
		panic(err)
	}
	return cache.Key{Link: cache.LinkID{Authority: "auth"}, TypeURL: resource.ListenerType, Name: c}
}

// TestUpstreamNativeGlob: a native glob is subscribed as itself; the first
// answer completes it, and an empty glob comes back in removed_resources.
func TestUpstreamNativeGlob(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "auth", Origins: []string{o.addr}, GlobCollections: config.GlobNative})
	g := ldsKey(ldsPrefix + "dir/*")
	w := newWatcher()
	r.c.Watch(w, nil, g)
	o.next("glob subscription", subscribes(resource.ListenerType, g.Name))
	if st := r.c.LookupMembers(g).State; st != cache.StatePending {
		t.Fatalf("glob before answer: %v, want pending", st)
	}
	l1, l2 := ldsPrefix+"dir/l1", ldsPrefix+"dir/l2"
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: "n1", Resources: []*discoveryv3.Resource{
		{Name: l1, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: l1})},
		{Name: l2, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: l2})},
	}})
	o.next("ACK of n1", answers("n1"))
	w.waitFor(t, "members notified", func() bool { return w.count(ldsKey(l1).Name) > 0 && w.count(ldsKey(l2).Name) > 0 })
	read := r.c.LookupMembers(g)
	ms, st := read.Members, read.State
	if st != cache.StatePresent || len(ms) != 2 {
		t.Fatalf("glob: %d members %v, want 2 present", len(ms), st)
	}

	empty := ldsKey(ldsPrefix + "empty/*")
	r.c.Watch(w, nil, empty)
	o.next("empty glob subscription", subscribes(resource.ListenerType, empty.Name))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: "n2", RemovedResources: []string{empty.Name}})
	o.next("ACK of n2", answers("n2"))
	w.waitFor(t, "empty glob notified", func() bool { return w.count(empty.Name) > 0 })
	if read := r.c.LookupMembers(empty); read.State != cache.StateAbsent || len(read.Members) != 0 {
		t.Errorf("empty glob: %d members %v, want 0 absent", len(read.Members), read.State)
	}
}

func versionOf(r *cache.Resource) string {
	if r == nil {
		return ""
	}
	return r.OriginVersion
}

// TestUpstreamHeartbeat: a delta heartbeat (a Resource without body, same
// version) refreshes the TTL, keeps the body and reaches watchers.
func TestUpstreamHeartbeat(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	o.next("subscription to c1", subscribes(resource.ClusterType, "c1"))
	body := mustAny(t, cluster("c1", 1))
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1",
		Resources: []*discoveryv3.Resource{{Name: "c1", Version: "1", Resource: body, Ttl: durationpb.New(time.Hour)}}})
	o.next("ACK of n1", answers("n1"))
	w.waitNotified(t, "c1", 1)

	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2",
		Resources: []*discoveryv3.Resource{{Name: "c1", Version: "1", Ttl: durationpb.New(2 * time.Hour)}}})
	if ack := o.next("ACK of n2", answers("n2")); ack.GetErrorDetail() != nil {
		t.Fatalf("heartbeat NACKed: %v", ack.GetErrorDetail())
	}
	w.waitNotified(t, "c1", 2)
	read := r.c.Lookup(nil, cdsKey("c1"))
	got, st := read.Res, read.State
	if st != cache.StatePresent || got.OriginVersion != "1" || got.TTL.AsDuration() != 2*time.Hour {
		t.Fatalf("after heartbeat: %v %+v, want present, version 1, TTL 2h", st, got)
	}
	if diff := cmp.Diff(body, got.Body, protocmp.Transform()); diff != "" {
		t.Errorf("body after heartbeat (-want +got):\n%s", diff)
	}
}

// TestUpstreamSotWNACK: a SotW response carrying a resource of another type
// than its type_url is NACKed with the last good version_info and a reason;
// the cache keeps the last good version.
func TestUpstreamSotWNACK(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}, Transport: xdstype.TransportSotW})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	o.nextSotW("request for c1", func(q *discoveryv3.DiscoveryRequest) bool {
		return q.GetTypeUrl() == resource.ClusterType && len(q.GetResourceNames()) == 1 && q.GetResourceNames()[0] == "c1"
	})
	o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v1", Nonce: "n1",
		Resources: []*anypb.Any{mustAny(t, cluster("c1", 1))}})
	ack := o.nextSotW("ACK of n1", func(q *discoveryv3.DiscoveryRequest) bool { return q.GetResponseNonce() == "n1" })
	if ack.GetErrorDetail() != nil || ack.GetVersionInfo() != "v1" {
		t.Fatalf("ACK of n1: version %q error %v", ack.GetVersionInfo(), ack.GetErrorDetail())
	}
	w.waitNotified(t, "c1", 1)

	o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v2", Nonce: "n2",
		Resources: []*anypb.Any{mustAny(t, listener("c1"))}})
	nack := o.nextSotW("NACK of n2", func(q *discoveryv3.DiscoveryRequest) bool { return q.GetResponseNonce() == "n2" })
	if nack.GetErrorDetail() == nil || nack.GetVersionInfo() != "v1" {
		t.Fatalf("NACK of n2: version %q (want v1) error %v", nack.GetVersionInfo(), nack.GetErrorDetail())
	}
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, resource.ListenerType) {
		t.Errorf("error_detail %q does not say which type was wrong", msg)
	}
	read := r.c.Lookup(nil, cdsKey("c1"))
	got, st := read.Res, read.State
	if st != cache.StatePresent || got.OriginVersion != "v1" {
		t.Errorf("after NACK: %v version %q, want present v1", st, versionOf(got))
	}
	if got := w.count("c1"); got != 1 {
		t.Errorf("watcher notified %d times, want 1 (nothing of the NACKed response)", got)
	}
}

// TestUpstreamTTLExpiry: a resource whose TTL elapses without heartbeat is
// removed at that moment: a delta client of the relay process gets it in
// removed_resources, with nothing else happening (no request, no update).
func TestUpstreamTTLExpiry(t *testing.T) {
	o := newScriptedOrigin(t)
	rl := startRelay(t, func(cfg *config.Config) {
		cfg.Authorities = []config.Authority{{Name: "origin", Origins: []string{o.addr}, Transport: xdstype.TransportDelta, GlobCollections: config.GlobNative}}
	})
	name := "xdstp://origin/envoy.config.cluster.v3.Cluster/ttl"
	d := openDelta(t, dial(t, rl.XDSAddr()))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "ttl-client"}, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{name}})
	o.next("subscription to "+name, subscribes(resource.ClusterType, name))
	// Short enough to keep the test fast; nothing below depends on the
	// resource reaching the client before it lapses.
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1",
		Resources: []*discoveryv3.Resource{{Name: name, Version: "1", Resource: mustAny(t, cluster(name, 1)), Ttl: durationpb.New(300 * time.Millisecond)}}})
	o.next("ACK of n1", answers("n1"))
	for {
		r := d.Recv() // fails the test after xdstest.WaitTimeout
		d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
		if slices.Contains(r.GetRemovedResources(), name) {
			return
		}
		for _, res := range r.GetResources() {
			if res.GetName() != name || res.GetTtl().AsDuration() != 300*time.Millisecond {
				t.Fatalf("unexpected resource %v", res)
			}
		}
	}
}
