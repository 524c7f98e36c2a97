package downstream

import (
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
)

// countingResolver counts the names it is asked to resolve.
type countingResolver struct {
	Resolver
	calls atomic.Int64
}

func (r *countingResolver) Resolve(typeURL, name string, node *corev3.Node) (Resolution, error) {
	r.calls.Add(1)
	return r.Resolver.Resolve(typeURL, name, node)
}

func nameTableServer(t *testing.T, r Resolver) *Server {
	t.Helper()
	srv, err := New(Options{Cache: newTestCache(t), Resolver: r, SendTimeout: config.DefaultSendTimeout, Limits: testLimits, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// An xdstp name is resolved once for every client that asks for it (a
// reconnect storm parses nobody's names again), into one shared string;
// asked as another type, or once the resolver is replaced, it is
// resolved anew; a legacy name is resolved every time (its rule may read
// the client's node).
func TestNameTableResolvesOnce(t *testing.T) {
	r := &countingResolver{Resolver: NewResolver([]string{authority}, legacyMatcher{})}
	srv := nameTableServer(t, r)
	name := xdstp(edsType, "x")
	// Each client's name is its own copy of the string, as from the wire.
	first, res1, err1 := srv.resolveName(edsType, string([]byte(name)), testNode)
	second, res2, err2 := srv.resolveName(edsType, string([]byte(name)), ttlNode)
	if err1 != nil || err2 != nil || res1 != res2 || res1.Key != key(edsType, name) {
		t.Fatalf("resolutions %+v (%v) and %+v (%v), want both %v", res1, err1, res2, err2, key(edsType, name))
	}
	if unsafe.StringData(first) != unsafe.StringData(second) || unsafe.StringData(res2.Key.Name) != unsafe.StringData(first) {
		t.Error("the second client's name is not the first one's string")
	}
	if got := r.calls.Load(); got != 1 {
		t.Errorf("resolver asked %d times for one xdstp name, want 1", got)
	}

	if _, _, err := srv.resolveName(cdsType, name, testNode); err == nil {
		t.Error("an EDS name asked as a cluster resolved")
	}
	if got := r.calls.Load(); got != 2 {
		t.Errorf("resolver asked %d times after another type, want 2", got)
	}

	for range 2 {
		if _, res, err := srv.resolveName(cdsType, "legacy", testNode); err != nil || res.Key.Link != legacyStream {
			t.Fatalf("legacy name: %+v, %v", res, err)
		}
	}
	if got := r.calls.Load(); got != 4 {
		t.Errorf("resolver asked %d times after a legacy name twice, want 4", got)
	}

	other := &countingResolver{Resolver: NewResolver([]string{"another"}, nil)}
	if err := srv.SetResolver(other); err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.resolveName(edsType, name, testNode); err == nil || other.calls.Load() != 1 {
		t.Errorf("after the resolver was replaced: err %v, new resolver asked %d times; want its unknown authority, once", err, other.calls.Load())
	}
}

// The table keeps at most nameTableSize names, however many clients ask
// for, and keeps the names asked for lately.
func TestNameTableBounded(t *testing.T) {
	srv := nameTableServer(t, NewResolver([]string{authority}, legacyMatcher{}))
	recent := xdstp(edsType, "recent")
	for i := range 2 * nameTableSize {
		if _, _, err := srv.resolveName(edsType, xdstp(edsType, fmt.Sprintf("n%d", i)), testNode); err != nil {
			t.Fatal(err)
		}
		if i%(nameTableSize/4) == 0 {
			srv.resolveName(edsType, recent, testNode)
		}
	}
	srv.names.mu.RLock()
	n := len(srv.names.cur) + len(srv.names.old)
	_, kept := srv.names.cur[recent]
	if !kept {
		_, kept = srv.names.old[recent]
	}
	srv.names.mu.RUnlock()
	if n > nameTableSize {
		t.Errorf("the table holds %d names, over its bound %d", n, nameTableSize)
	}
	if !kept {
		t.Error("a name asked for lately was dropped")
	}
}
