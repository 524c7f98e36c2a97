package downstream

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// putStored puts a revision and returns it as the cache stored it (with
// its ledger record).
func (e *env) putStored(name, version string) *cache.Resource {
	e.t.Helper()
	e.put(edsType, name, version)
	r := e.cache.Lookup(nil, key(edsType, name)).Res
	return r
}

// change returns the ledger's view of the change that brought r, a
// stored revision.
func (e *env) change(r *cache.Resource) propagation.ChangeView {
	e.t.Helper()
	if r.Change == nil {
		e.t.Fatalf("%s: no ledger record", r.Name)
	}
	for _, v := range e.cache.ledger.Page(propagation.PageQuery{}).Changes {
		if v.ID == r.Change.ID() {
			return v
		}
	}
	e.t.Fatalf("change %d of %s not listed", r.Change.ID(), r.Name)
	return propagation.ChangeView{}
}

// waitCounts waits until the change that brought r has counts want.
func (e *env) waitCounts(r *cache.Resource, want propagation.Counts) {
	e.t.Helper()
	xdstest.Poll(e.t, "change counts", func() error {
		if got := e.change(r).Counts; got != want {
			return fmt.Errorf("counts %+v, want %+v", got, want)
		}
		return nil
	})
}

func nodeNamed(id string) *corev3.Node { return &corev3.Node{Id: id, Cluster: "c1"} }

// deltaSub opens a delta stream for node id subscribed to name, takes the
// first response and ACKs it.
func (e *env) deltaSub(id, name string) *deltaStreamC {
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: nodeNamed(id), TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
	c.Send(ack(edsType, c.Recv()))
	return c
}

// One origin change, sent to four client streams of both variants: the
// two that ACK are counted ACKed (with their latency), the one that NACKs
// NACKed (its node and error kept), the silent one pending until its
// stream ends (then gone); a client that subscribes later is sent the same
// change and counted in it.
func TestPropagationCounts(t *testing.T) {
	e := newEnv(t, 0)
	name := xdstp(edsType, "r")
	e.put(edsType, name, "1")
	acker, nacker := e.deltaSub("acker", name), e.deltaSub("nacker", name)
	silent, stop := xdstest.Start(t, xdstest.DeltaOpener(e.conn))
	silent.Send(&discoveryv3.DeltaDiscoveryRequest{Node: nodeNamed("silent"), TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
	silent.Recv()
	s := e.sotw()
	s.Send(&discoveryv3.DiscoveryRequest{Node: nodeNamed("sotw"), TypeUrl: edsType, ResourceNames: []string{name}})
	first := s.Recv()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{name}, VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce()})

	r2 := e.putStored(name, "2")
	acker.Send(ack(edsType, acker.Recv()))
	got := nacker.Recv()
	nacker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: got.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "endpoint port out of range"}})
	silent.Recv()
	resp := s.Recv()
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: edsType, ResourceNames: []string{name}, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})

	e.waitCounts(r2, propagation.Counts{Sent: 4, Acked: 2, Nacked: 1, Pending: 1})
	v := e.change(r2)
	if v.State != propagation.StateConverging || v.P50MS <= 0 || len(v.Reasons) != 1 || v.Reasons[0].Message != "endpoint port out of range" {
		t.Errorf("change %+v: want converging, a latency, the NACK's reason", v)
	}
	ns := e.cache.ledger.Page(propagation.PageQuery{Detail: true}).Changes
	var nackers []propagation.Nacker
	for _, c := range ns {
		if c.ID == v.ID {
			nackers = c.Nackers
		}
	}
	if len(nackers) != 1 || nackers[0].Node != "nacker" || len(nackers[0].Names) != 1 || nackers[0].Names[0] != name {
		t.Errorf("nackers %+v, want node nacker with %s", nackers, name)
	}

	stop() // the silent client leaves without answering
	e.waitCounts(r2, propagation.Counts{Sent: 4, Acked: 2, Nacked: 1, Gone: 1})
	if st := e.change(r2).State; st != propagation.StateNacked {
		t.Errorf("state %s, want %s (settled, some NACKed: never converged)", st, propagation.StateNacked)
	}

	late := e.deltaSub("late", name)
	e.waitCounts(r2, propagation.Counts{Sent: 5, Acked: 3, Nacked: 1, Gone: 1})
	late.None()
}

// A client sent a change it has not answered, then a newer state of the
// same resource, that ACKs only the latter: the first change is
// superseded for it (it never ran it), the second ACKed.
func TestPropagationSuperseded(t *testing.T) {
	e := newEnv(t, 0)
	name := xdstp(edsType, "r")
	e.put(edsType, name, "1")
	c := e.deltaSub("n", name)
	r2 := e.putStored(name, "2")
	c.Recv() // not answered
	r3 := e.putStored(name, "3")
	c.Send(ack(edsType, c.Recv()))
	e.waitCounts(r3, propagation.Counts{Sent: 1, Acked: 1})
	e.waitCounts(r2, propagation.Counts{Sent: 1, Superseded: 1})
}

// Every reason reasonOf gives, from the case that gives it: none is left
// without one, and none says "unknown".
func TestReasonOfEveryReason(t *testing.T) {
	rev := &cache.Resource{Name: "r", Version: "v2"}
	sent := sentRevOf(rev, 2)
	accepted := &cache.Resource{Name: "r", Version: "v1"}
	old := sentRevOf(&cache.Resource{Name: "r", Version: "v1"}, 1)
	tests := []struct {
		name string
		v    nameView
		want propagation.Reason
	}{
		{"holds the newest, ACKed", nameView{h: sent, hasSent: true, state: cache.StatePresent, res: rev,
			status: ResourceStatus{State: ResourceAcked}}, propagation.InSync},
		{"told it does not exist, ACKed", nameView{h: sentRev{absent: true, seq: 1}, hasSent: true, state: cache.StateAbsent,
			status: ResourceStatus{State: ResourceAcked}}, propagation.InSync},
		{"the origin has not answered", nameView{state: cache.StatePending, status: ResourceStatus{State: ResourceRequested}}, propagation.WaitingForOrigin},
		{"owed a do_not_cache revision afresh", nameView{h: old, hasSent: true, state: cache.StatePresent, res: rev, withheld: true,
			status: ResourceStatus{State: ResourceAcked}}, propagation.WaitingForOrigin},
		{"kept back by the gather window", nameView{state: cache.StatePresent, res: rev, gathering: true,
			status: ResourceStatus{State: ResourceRequested}}, propagation.GatherWindow},
		{"a newer version, the writer sending", nameView{h: old, hasSent: true, state: cache.StatePresent, res: rev, writerBusy: true,
			status: ResourceStatus{State: ResourceAcked}}, propagation.NotWritten},
		{"a newer version, about to be written", nameView{h: old, hasSent: true, state: cache.StatePresent, res: rev,
			status: ResourceStatus{State: ResourceAcked}}, propagation.NotWritten},
		{"removed, not told yet", nameView{h: sent, hasSent: true, state: cache.StateAbsent,
			status: ResourceStatus{State: ResourceAcked}}, propagation.NotWritten},
		{"sent, not answered", nameView{h: sent, hasSent: true, state: cache.StatePresent, res: rev,
			status: ResourceStatus{State: ResourceSent}}, propagation.AwaitingAck},
		{"NACKed", nameView{h: sent, hasSent: true, state: cache.StatePresent, res: rev,
			status: ResourceStatus{State: ResourceNacked, Nack: &NackState{Message: "bad"}}}, propagation.Nacked},
		{"a denied glob", nameView{unknown: &unknownName{detail: relayNotFound}}, propagation.Denied},
		{"a denied member", nameView{denied: true, state: cache.StatePresent, res: rev}, propagation.Denied},
		{"an unknown authority", nameView{unknown: &unknownName{detail: unknownAuthority}}, propagation.NotServed},
		{"a type not carried", nameView{unknown: &unknownName{detail: typeNotCarried}}, propagation.NotServed},
		{"held by the breaker, sent back the last accepted", nameView{h: sentRevOf(accepted, 3), hasSent: true,
			state: cache.StatePresent, res: rev, ro: cache.Rollout{Hold: &cache.Hold{Reason: cache.HoldBreaker}, Accepted: accepted},
			status: ResourceStatus{State: ResourceAcked}}, propagation.HeldByBreaker},
		{"held by a wave not open", nameView{h: sentRevOf(accepted, 1), hasSent: true, state: cache.StatePresent, res: rev,
			ro:     cache.Rollout{Hold: &cache.Hold{Reason: cache.HoldWave, Waves: closedWaves{}}, Accepted: accepted},
			status: ResourceStatus{State: ResourceAcked}}, propagation.HeldByWave},
		{"a removal held by the deletion guard", nameView{h: sent, hasSent: true, state: cache.StatePresent, res: rev,
			ro: cache.Rollout{Deferred: true}, status: ResourceStatus{State: ResourceAcked}}, propagation.HeldByDeletionGuard},
	}
	seen := map[propagation.Reason]bool{}
	for _, tt := range tests {
		got, _ := reasonOf(&tt.v)
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		seen[got] = true
	}
	for _, r := range propagation.Reasons() {
		if !seen[r] {
			t.Errorf("no case gives reason %s (%s): add one", r, r.Words())
		}
		if r.String() == "" || r.Words() == "" || r.String() == "unknown" {
			t.Errorf("reason %d has no words", r)
		}
	}
}

// progressOf returns node id's resources by name, from ClientProgress,
// and an error when the state of one is not what CSDS reports of it (two
// reads: a client's answer between them can make them differ for a
// moment, so callers poll until they agree).
func (e *env) progressOf(id string) (map[string]ResourceProgress, error) {
	e.t.Helper()
	rep := e.srv.ClientProgress(id)
	csds := map[string]ResourceState{}
	for _, c := range e.srv.ConfigStatus(StatusQuery{Match: func(n *corev3.Node) bool { return n.GetId() == id },
		MaxClients: 10, MaxResources: 1000}).Clients {
		for _, r := range c.Resources {
			csds[r.Name] = r.State
		}
	}
	out := map[string]ResourceProgress{}
	var err error
	for _, s := range rep.Streams {
		for _, r := range s.Resources {
			out[r.Name] = r
			if st, ok := csds[r.Name]; ok && st.String() != r.State {
				err = fmt.Errorf("%s %s: state %s, CSDS says %s", id, r.Name, r.State, st)
			}
		}
	}
	return out, err
}

// waitReason waits until node id's name has reason want, and the client
// view agrees with CSDS.
func (e *env) waitReason(id, name string, want propagation.Reason) ResourceProgress {
	e.t.Helper()
	var got ResourceProgress
	xdstest.Poll(e.t, id+" "+name+" "+want.String(), func() error {
		all, err := e.progressOf(id)
		if got = all[name]; got.Reason != want {
			return fmt.Errorf("%+v", got)
		}
		return err
	})
	return got
}

// "Why is this client behind?" through real streams: a client in sync,
// one that has not answered, one that NACKed (it runs the version it
// ACKed before), one whose writer is still sending, one waiting for the
// origin, a name not served, a glob denied; each with the versions sent,
// ACKed and newest, and the state CSDS reports.
func TestClientProgressReasons(t *testing.T) {
	e := newEnv(t, 0)
	name := xdstp(edsType, "r")
	r1 := e.putStored(name, "1")
	insync := e.deltaSub("in-sync", name)
	silent := e.deltaSub("silent", name)
	nacker := e.deltaSub("nacker", name)
	r2 := e.putStored(name, "2")
	insync.Send(ack(edsType, insync.Recv()))
	e.waitReason("in-sync", name, propagation.InSync)
	silent.Recv()
	got := nacker.Recv()
	nacker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: got.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "port 70000"}})

	p := e.waitReason("silent", name, propagation.AwaitingAck)
	if p.Sent != r2.Version || p.Acked != r1.Version || p.Newest != r2.Version || p.State != "sent" {
		t.Errorf("silent: %+v, want sent %s, ACKed %s, newest %s, state sent", p, r2.Version, r1.Version, r2.Version)
	}
	p = e.waitReason("nacker", name, propagation.Nacked)
	if p.Sent != r2.Version || p.Acked != r1.Version || p.Detail != "port 70000" || p.State != "nacked" {
		t.Errorf("nacker: %+v, want sent %s, ACKed %s (what it runs), the error, state nacked", p, r2.Version, r1.Version)
	}

	pending := xdstp(edsType, "x"+heldPending+"1")
	unknown := "xdstp://unknown.example/envoy.config.endpoint.v3.ClusterLoadAssignment/u"
	o := e.delta()
	o.Send(&discoveryv3.DeltaDiscoveryRequest{Node: nodeNamed("other"), TypeUrl: edsType, ResourceNamesSubscribe: []string{pending, unknown}})
	o.Recv() // the unknown name's removal
	e.waitReason("other", pending, propagation.WaitingForOrigin)
	e.waitReason("other", unknown, propagation.NotServed)

	e.srv.SetAccess(onlyCluster("prod-*"))
	glob := xdstp(edsType, "dir/*")
	d := e.delta()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: nodeNamed("denied"), TypeUrl: edsType, ResourceNamesSubscribe: []string{glob}})
	d.Recv()
	e.waitReason("denied", glob, propagation.Denied)

	if rep := e.srv.ClientProgress("nobody"); len(rep.Streams) != 0 {
		t.Errorf("a node with no stream: %+v", rep)
	}
}

// A client whose writer is still sending (here: held before its Send)
// when a newer version arrives: that version is not yet written.
func TestClientProgressNotWritten(t *testing.T) {
	e := newEnv(t, 0)
	name := xdstp(edsType, "r")
	e.putStored(name, "1")
	c := e.deltaSub("slow", name)
	atSend, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	e.srv.sendHook = func(typeURL string) {
		if typeURL == edsType && armed.CompareAndSwap(true, false) {
			close(atSend)
			<-release
		}
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	e.putStored(name, "2")
	<-atSend
	r3 := e.putStored(name, "3")
	p := e.waitReason("slow", name, propagation.NotWritten)
	if p.Newest != r3.Version || p.Detail == "" {
		t.Errorf("%+v, want newest %s and what the writer is doing", p, r3.Version)
	}
	close(release)
	c.Send(ack(edsType, c.Recv()))
	c.Send(ack(edsType, c.Recv()))
	e.waitReason("slow", name, propagation.InSync)
}

// A request's names kept back by the gather window: the one the relay
// holds waits for the one the origin has not answered.
func TestClientProgressGather(t *testing.T) {
	e, _, _ := gatherEnv(t)
	names, rs := eds("g", 2)
	e.answer(rs[0])
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: nodeNamed("gathering"), TypeUrl: edsType, ResourceNamesSubscribe: names})
	e.waitReason("gathering", names[0], propagation.GatherWindow)
	e.waitReason("gathering", names[1], propagation.WaitingForOrigin)
	c.None()
}

// BenchmarkClientProgress answers "why is this client behind?" for one
// node among 100000 connected streams (each subscribed to 2 names, all
// held and ACKed): the node's streams are found by id, so the answer costs
// the same whatever the number of clients. ns/op is one answer.
func BenchmarkClientProgress(b *testing.B) {
	const streams, names = 100000, 2
	e := newEnv(b, 0)
	var rs [names]*cache.Resource
	var keys [names]cache.Key
	for j := range names {
		n := xdstp(edsType, fmt.Sprintf("r%d", j))
		rs[j], keys[j] = e.putStored(n, "1"), key(edsType, n)
	}
	for i := range streams {
		ss := newSession(e.srv, xdstype.Delta, "", "bench", access.Identity{}, nil)
		e.srv.addSession(ss)
		if err := ss.setNode(&corev3.Node{Id: fmt.Sprintf("node-%06d", i)}); err != nil {
			b.Fatal(err)
		}
		ss.mu.Lock()
		ts := ss.typeLocked(edsType)
		for j := range names {
			ts.addLocked(keys[j].Name, keys[j], false)
			ts.sent.set(keys[j].Name, sentRevOf(rs[j], 1))
		}
		ts.answered = 1
		ss.mu.Unlock()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rep := e.srv.ClientProgress(fmt.Sprintf("node-%06d", i*7919%streams))
		if len(rep.Streams) != 1 || len(rep.Streams[0].Resources) != names || rep.Streams[0].Resources[0].Reason != propagation.InSync {
			b.Fatalf("%+v", rep)
		}
	}
}

// A client whose ACK of one version arrives after the next was sent, and
// which NACKs that next one: it runs the version its late ACK accepted.
func TestClientProgressLateAck(t *testing.T) {
	e := newEnv(t, 0)
	name := xdstp(edsType, "r")
	r1 := e.putStored(name, "1")
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: nodeNamed("late"), TypeUrl: edsType, ResourceNamesSubscribe: []string{name}})
	first := c.Recv()
	r2 := e.putStored(name, "2")
	second := c.Recv() // sent before the client answered the first
	c.Send(ack(edsType, first))
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsType, ResponseNonce: second.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "no"}})
	p := e.waitReason("late", name, propagation.Nacked)
	if p.Acked != r1.Version || p.Sent != r2.Version {
		t.Errorf("%+v: want ACKed %s (the late ACK), sent %s", p, r1.Version, r2.Version)
	}
	e.waitCounts(r1, propagation.Counts{Sent: 1, Acked: 1}) // its own answer, though late
	e.waitCounts(r2, propagation.Counts{Sent: 1, Nacked: 1})
}

// closedWaves admits nobody: every wave of it is closed.
type closedWaves struct{}

func (closedWaves) Admits(cache.Viewer) bool { return false }
