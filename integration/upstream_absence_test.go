package integration

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// The relay says a resource or a collection does not exist only when the
// origin said so for that name (docs/reliability.md, "Absence only when
// the origin said so"). Each test below is a response the relay once read as absence
// of something the origin never spoke of; a scripted origin sends it,
// because a go-control-plane origin never interleaves its answers so.

// TestNoFalseAbsenceOtherGlob: over delta with native globs, the answer to
// one glob does not complete another glob awaiting its own answer: that
// glob stays pending (clients are not told it is empty) until the origin
// answers it.
func TestNoFalseAbsenceOtherGlob(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "auth", Origins: []string{o.addr}, GlobCollections: config.GlobNative})
	ga, gb := ldsKey(ldsPrefix+"a/*"), ldsKey(ldsPrefix+"b/*")
	w := newWatcher()
	r.c.Watch(w, nil, ga)
	o.next("glob a subscription", subscribes(resource.ListenerType, ga.Name))
	r.c.Watch(w, nil, gb)
	o.next("glob b subscription", subscribes(resource.ListenerType, gb.Name))

	a1 := ldsPrefix + "a/l1"
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: "n1", Resources: []*discoveryv3.Resource{
		{Name: a1, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: a1})},
	}})
	o.next("ACK of n1", answers("n1"))
	w.waitFor(t, "glob a answered", func() bool { return r.c.LookupMembers(ga).State == cache.StatePresent })
	if read := r.c.LookupMembers(gb); read.State != cache.StatePending || len(read.Members) != 0 {
		t.Fatalf("glob b after glob a's answer: %d members %v, want pending (the origin said nothing of b)", len(read.Members), read.State)
	}
	if n := w.count(gb.Name); n != 0 {
		t.Errorf("glob b watchers told %d times of b before its answer", n)
	}

	b1 := ldsPrefix + "b/l1"
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: "n2", Resources: []*discoveryv3.Resource{
		{Name: b1, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: b1})},
	}})
	o.next("ACK of n2", answers("n2"))
	w.waitFor(t, "glob b answered", func() bool { l := r.c.LookupMembers(gb); return l.State == cache.StatePresent && len(l.Members) == 1 })
}

// TestNoFalseAbsenceEarlierAnswerWildcard: over delta, a response that
// only holds a name subscribed before the wildcard (the answer to that
// earlier request) does not complete the wildcard; the globs emulated over
// it stay pending. The wildcard's own answer (a name nobody asked for by
// name) completes both.
func TestNoFalseAbsenceEarlierAnswerWildcard(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "auth", Origins: []string{o.addr}, GlobCollections: config.GlobEmulated})
	l1 := ldsPrefix + "dir/l1"
	g := ldsKey(ldsPrefix + "dir/*")
	w := newWatcher()
	r.c.Watch(w, nil, ldsKey(l1))
	o.next("subscription to l1", subscribes(resource.ListenerType, ldsKey(l1).Name))
	r.c.Watch(w, nil, g)
	o.next("wildcard subscription", subscribes(resource.ListenerType, cache.Wildcard))

	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: "n1", Resources: []*discoveryv3.Resource{
		{Name: l1, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: l1})},
	}})
	o.next("ACK of n1", answers("n1"))
	w.waitState(t, r.c, ldsKey(l1), cache.StatePresent)
	if st := r.c.LookupMembers(g).State; st != cache.StatePending {
		t.Fatalf("emulated glob after the answer to l1 alone: %v, want pending", st)
	}

	l2 := ldsPrefix + "dir/l2"
	o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: "n2", Resources: []*discoveryv3.Resource{
		{Name: l1, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: l1})},
		{Name: l2, Version: "1", Resource: mustAny(t, &listenerv3.Listener{Name: l2})},
	}})
	o.next("ACK of n2", answers("n2"))
	w.waitFor(t, "emulated glob answered", func() bool { l := r.c.LookupMembers(g); return l.State == cache.StatePresent && len(l.Members) == 2 })
}

// TestNoFalseAbsenceSotWLaterName: a SotW Cluster response is full state
// only for the names of the request it answers. c2, subscribed after the
// request the origin answered (both carry the last response's nonce, and
// the origin may answer either), stays pending, and the relay asks again;
// the answer to a request that held c2 and lacks it makes it absent.
func TestNoFalseAbsenceSotWLaterName(t *testing.T) {
	o := newScriptedOrigin(t)
	r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}, Transport: xdstype.TransportSotW})
	w := newWatcher()
	r.c.Watch(w, nil, cdsKey("c1"))
	o.nextSotW("request for c1", sotwAsks(resource.ClusterType, "c1"))
	o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v1", Nonce: "n1",
		Resources: []*anypb.Any{mustAny(t, cluster("c1", 1))}})
	o.nextSotW("ACK of n1", sotwAnswers("n1"))
	w.waitState(t, r.c, cdsKey("c1"), cache.StatePresent)

	r.c.Watch(w, nil, cdsKey("c2"))
	o.nextSotW("request for c1 and c2", sotwAsks(resource.ClusterType, "c1", "c2"))
	// An origin change, built on the ACK of n1 (c1 alone).
	o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v2", Nonce: "n2",
		Resources: []*anypb.Any{mustAny(t, cluster("c1", 2))}})
	o.nextSotW("ACK of n2", func(q *discoveryv3.DiscoveryRequest) bool {
		return q.GetResponseNonce() == "n2" && q.GetVersionInfo() == "v2"
	})
	again := o.nextSotW("request again for c1 and c2", func(q *discoveryv3.DiscoveryRequest) bool {
		return q.GetResponseNonce() == "n2" && q.GetVersionInfo() == ""
	})
	if !sotwAsks(resource.ClusterType, "c1", "c2")(again) {
		t.Fatalf("asked again for %v, want [c1 c2]", again.GetResourceNames())
	}
	if st := r.c.Lookup(nil, cdsKey("c2")).State; st != cache.StatePending {
		t.Fatalf("c2 after an answer to a request without it: %v, want pending", st)
	}
	if n := w.count("c2"); n != 0 {
		t.Errorf("c2 watchers told %d times before the origin spoke of c2", n)
	}

	o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v2", Nonce: "n3",
		Resources: []*anypb.Any{mustAny(t, cluster("c1", 2))}})
	o.nextSotW("ACK of n3", sotwAnswers("n3"))
	w.waitState(t, r.c, cdsKey("c2"), cache.StateAbsent)
}

// TestNoFalseAbsenceOutsideWildcard: a named key that the known wildcard
// lacks is asked of the origin, which may serve names outside its
// wildcard: it is pending (nobody is told it does not exist) until the
// origin answers, here with the resource.
func TestNoFalseAbsenceOutsideWildcard(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string
	}{{"delta", xdstype.TransportDelta}, {"sotw", xdstype.TransportSotW}} {
		t.Run(tc.name, func(t *testing.T) {
			o := newScriptedOrigin(t)
			r := newRelay(t, nil, config.Authority{Name: "origin", Origins: []string{o.addr}, Transport: tc.transport})
			w := newWatcher()
			all := cdsKey(cache.Wildcard)
			r.c.Watch(w, nil, all)
			c1 := mustAny(t, cluster("c1", 1))
			hidden := mustAny(t, &clusterv3.Cluster{Name: "hidden"})
			if tc.transport == xdstype.TransportDelta {
				o.next("wildcard subscription", subscribes(resource.ClusterType, cache.Wildcard))
				o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n1",
					Resources: []*discoveryv3.Resource{{Name: "c1", Version: "1", Resource: c1}}})
				o.next("ACK of n1", answers("n1"))
			} else {
				o.nextSotW("wildcard request", sotwAsks(resource.ClusterType))
				o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v1", Nonce: "n1", Resources: []*anypb.Any{c1}})
				o.nextSotW("ACK of n1", sotwAnswers("n1"))
			}
			w.waitFor(t, "wildcard known", func() bool { return r.c.LookupMembers(all).State == cache.StatePresent })

			r.c.Watch(w, nil, cdsKey("hidden"))
			if st := r.c.Lookup(nil, cdsKey("hidden")).State; st != cache.StatePending {
				t.Fatalf("named key the wildcard lacks: %v, want pending", st)
			}
			if tc.transport == xdstype.TransportDelta {
				o.next("subscription to hidden", subscribes(resource.ClusterType, "hidden"))
				o.send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2",
					Resources: []*discoveryv3.Resource{{Name: "hidden", Version: "1", Resource: hidden}}})
				o.next("ACK of n2", answers("n2"))
			} else {
				o.nextSotW("request for hidden", sotwAsks(resource.ClusterType, "*", "hidden"))
				o.sendSotW(&discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterType, VersionInfo: "v2", Nonce: "n2", Resources: []*anypb.Any{c1, hidden}})
				o.nextSotW("ACK of n2", sotwAnswers("n2"))
			}
			w.waitState(t, r.c, cdsKey("hidden"), cache.StatePresent)
		})
	}
}

// sotwAsks matches a SotW request of typeURL whose resource_names are
// exactly names (none: the wildcard).
func sotwAsks(typeURL string, names ...string) func(*discoveryv3.DiscoveryRequest) bool {
	return func(q *discoveryv3.DiscoveryRequest) bool {
		if q.GetTypeUrl() != typeURL || len(q.GetResourceNames()) != len(names) {
			return false
		}
		for i, n := range q.GetResourceNames() {
			if n != names[i] {
				return false
			}
		}
		return true
	}
}

func sotwAnswers(nonce string) func(*discoveryv3.DiscoveryRequest) bool {
	return func(q *discoveryv3.DiscoveryRequest) bool { return q.GetResponseNonce() == nonce }
}
