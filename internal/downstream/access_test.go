package downstream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// onlyCluster is a policy under which a.example serves only clients whose
// node cluster matches pattern.
func onlyCluster(t *testing.T, pattern string) *access.Policy {
	t.Helper()
	p, err := access.New(access.Options{Authorities: map[string]access.Authority{
		authority: {Allow: []access.Rule{{NodeCluster: pattern}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSetAccessStopsRunningWriter: a writer that built a response under
// the old rules and reaches Send only after SetAccess returned does not
// send it: the stream ends with PermissionDenied and nothing else. Both
// for a name subscribed explicitly and for a member of the legacy
// wildcard whose own authority the new rules close.
func TestSetAccessStopsRunningWriter(t *testing.T) {
	member := xdstp(cdsType, "m1") // an xdstp member of the legacy wildcard
	for _, tc := range []struct {
		name    string
		typeURL string
		key     cache.Key
		sub     string
	}{
		{"explicit name", edsType, key(edsType, xdstp(edsType, "e1")), xdstp(edsType, "e1")},
		{"wildcard member", cdsType, cache.Key{Stream: legacyStream, TypeURL: cdsType, Name: member}, "*"},
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
			e.srv.SetAccess(onlyCluster(t, "prod-*"))
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
			if n := e.srv.SetAccess(onlyCluster(t, "canary-*")); n != 1 {
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
