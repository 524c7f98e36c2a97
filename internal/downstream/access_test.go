package downstream

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// onlyCluster is a policy under which the authorities (default a.example)
// serve only clients whose node cluster matches pattern.
func onlyCluster(pattern string, authorities ...string) *access.Policy {
	if len(authorities) == 0 {
		authorities = []string{authority}
	}
	auths := make(map[string]access.Authority)
	for _, a := range authorities {
		auths[a] = access.Authority{Allow: []access.AllowEntry{{NodeCluster: pattern}}}
	}
	p, err := access.New(access.Options{Authorities: auths})
	if err != nil {
		panic(err) // a fixed, valid policy
	}
	return p
}

// TestSetAccessStopsRunningWriter: a writer that built a response under
// the old rules and reaches Send only after SetAccess returned does not
// send it: the stream ends with PermissionDenied and nothing else. Both
// for a name subscribed explicitly (its response built on the fast path,
// shared.go) and for a member of the legacy wildcard whose own authority
// (by the rules) the new rules close (the general path).
func TestSetAccessStopsRunningWriter(t *testing.T) {
	member := "restricted/m1" // a member of the legacy wildcard the rules give to restricted.example
	for _, tc := range []struct {
		name    string
		typeURL string
		key     cache.Key
		sub     string
		shared  bool // the response is built on the fast path
	}{
		{"explicit name", edsType, key(edsType, xdstp(edsType, "e1")), xdstp(edsType, "e1"), true},
		{"wildcard member", cdsType, cache.Key{Link: legacyStream, TypeURL: cdsType, Name: member}, "*", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0)
			// The hook holds the writer after it built the armed response
			// and before its last check.
			var armed atomic.Bool
			atSend, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			e.srv.sendHook = func(typeURL string) {
				if typeURL == tc.typeURL && armed.CompareAndSwap(true, false) {
					close(atSend)
					<-release
				}
			}
			e.srv.SetAccess(onlyCluster("prod-*", authority, "restricted.example"))
			e.cache.set(tc.key, res(tc.typeURL, tc.key.Name, "1"))

			c := e.delta()
			c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "n", Cluster: "prod-1"}, TypeUrl: tc.typeURL, ResourceNamesSubscribe: []string{tc.sub}})
			if got := c.Recv(); len(got.GetResources()) != 1 || got.GetResources()[0].GetName() != tc.key.Name {
				t.Fatalf("allowed client: got %v, want %s", got, tc.key.Name)
			}
			armed.Store(true)
			e.cache.set(tc.key, res(tc.typeURL, tc.key.Name, "2"))
			select {
			case <-atSend:
			case <-time.After(xdstest.WaitTimeout):
				t.Fatal("the writer never reached Send with the change")
			}
			if got := testutil.ToFloat64(e.srv.m.sharedResponses.WithLabelValues(typeLabel(tc.typeURL))) == 1; got != tc.shared {
				t.Errorf("built on the fast path: %v, want %v", got, tc.shared)
			}
			if n := e.srv.SetAccess(onlyCluster("canary-*", authority, "restricted.example")); n != 1 {
				t.Errorf("SetAccess ended %d streams, want 1", n)
			}
			once.Do(func() { close(release) })
			select {
			case r := <-c.Responses():
				t.Fatalf("after SetAccess returned, the client received %v", r)
			case err := <-c.Errors():
				if st := status.Convert(err); st.Code() != codes.PermissionDenied {
					t.Errorf("stream ended with %v, want PermissionDenied", st)
				}
			case <-time.After(xdstest.WaitTimeout):
				t.Fatal("the stream did not end")
			}
		})
	}
}

// BenchmarkMemberCheck measures checking a 1,000-member wildcard listing
// for a client some authority denies (half the members are xdstp names of
// that authority, half legacy names a rule match resolves), and for one no
// authority denies anything (the common case: nothing is checked).
func BenchmarkMemberCheck(b *testing.B) {
	quietLogs.Store(true)
	defer quietLogs.Store(false)
	e := newEnv(b, 0)
	pol := onlyCluster("prod-*")
	var members []*cache.Resource
	for i := range 1000 {
		name := fmt.Sprintf("legacy-%d", i)
		if i%2 == 0 {
			name = xdstp(cdsType, fmt.Sprintf("c%d", i))
		}
		members = append(members, res(cdsType, name, "1"))
	}
	for _, cluster := range []string{"staging", "prod-1"} {
		b.Run("node_cluster="+cluster, func(b *testing.B) {
			ss := newSession(e.srv, xdstype.Delta, "", "bench", access.Identity{}, nil)
			ss.setNode(&corev3.Node{Id: "n", Cluster: cluster})
			wildcard := cache.Key{Link: legacyStream, TypeURL: cdsType, Name: cache.Wildcard}
			ss.mu.Lock()
			defer ss.mu.Unlock()
			ts := ss.typeLocked(cdsType)
			ts.addLocked(cache.Wildcard, wildcard, true)
			w := &work{ts: ts}
			b.ReportAllocs()
			for b.Loop() {
				w.probes = append(w.probes[:0], probe{name: cache.Wildcard, key: wildcard, collection: true, members: members})
				ss.checkMembersLocked(pol, w)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(members)), "ns/member")
		})
	}
}

// TestAliasCheckedByItsOwnAuthority: a name asked by alias is answered by
// a resource of another name, which the rules may give to an authority
// the client is denied (an origin serving two authorities). It is checked
// by its own name's authority, as a collection member is: denied, the
// client is sent nothing of it, while a resource of an open authority
// found by alias is sent.
func TestAliasCheckedByItsOwnAuthority(t *testing.T) {
	e := newEnv(t, 0)
	pol, err := access.New(access.Options{Authorities: map[string]access.Authority{
		"restricted.example": {Allow: []access.AllowEntry{{NodeCluster: "prod-*"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.SetAccess(pol)
	const deniedAlias, openAlias = "rc/secret.example.com", "rc/www.example.com"
	const restricted = "restricted/vh1"
	e.cache.set(cache.Key{Link: legacyStream, TypeURL: vhType, Name: restricted},
		fieldsRes(vhType, restricted, "1", []string{deniedAlias}, nil, nil))
	open := fieldsRes(vhType, "rc/vh2", "1", []string{openAlias}, nil, nil)
	e.cache.set(key(vhType, "rc/vh2"), open)

	c := e.delta() // testNode: cluster c1, which restricted.example denies
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: vhType, ResourceNamesSubscribe: []string{deniedAlias}})
	e.syncDelta(c) // the next response is the sync's: nothing was sent for the alias
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: vhType, ResourceNamesSubscribe: []string{openAlias}})
	checkDelta(t, deltaResp(vhType, nil, dfres("rc/vh2", open)), c.Recv())
}

// TestSetAccessEndsAliasHolder: a reload whose rules deny the authority of
// a resource a client was sent by alias ends that client's stream, as for
// a collection member it holds.
func TestSetAccessEndsAliasHolder(t *testing.T) {
	e := newEnv(t, 0)
	const alias = "rc/www.example.com"
	const own = "restricted/vh1"
	r := fieldsRes(vhType, own, "1", []string{alias}, nil, nil)
	e.cache.set(cache.Key{Link: legacyStream, TypeURL: vhType, Name: own}, r)
	c := e.delta()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: testNode, TypeUrl: vhType, ResourceNamesSubscribe: []string{alias}})
	got := c.Recv()
	checkDelta(t, deltaResp(vhType, nil, dfres(own, r)), got)
	c.Send(ack(vhType, got))
	e.syncDelta(c)

	pol, err := access.New(access.Options{Authorities: map[string]access.Authority{
		"restricted.example": {Allow: []access.AllowEntry{{NodeCluster: "prod-*"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.srv.SetAccess(pol); n != 1 {
		t.Errorf("SetAccess ended %d streams, want 1 (the alias holder)", n)
	}
	select {
	case r := <-c.Responses():
		t.Fatalf("after SetAccess, the client received %v", r)
	case err := <-c.Errors():
		if st := status.Convert(err); st.Code() != codes.PermissionDenied {
			t.Errorf("stream ended with %v, want PermissionDenied", st)
		}
	case <-time.After(xdstest.WaitTimeout):
		t.Fatal("the stream did not end")
	}
}
