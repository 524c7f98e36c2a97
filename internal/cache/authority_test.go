package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// TestApplyRefusesOtherAuthority: the cache's own line behind the
// upstream's NACK. An Apply on a.example's links keeps plain names and
// a.example's xdstp names and refuses b.example's: as a resource, a
// removal, a resource error and an alias; nothing is stored under them,
// and the names it owns in the same update are applied.
func TestApplyRefusesOtherAuthority(t *testing.T) {
	const (
		own   = "xdstp://a.example/envoy.config.listener.v3.Listener/own"
		other = "xdstp://b.example/envoy.config.listener.v3.Listener/other"
		alias = "xdstp://b.example/envoy.config.listener.v3.Listener/alias"
	)
	for _, link := range []LinkID{{Authority: "a.example"}, {Authority: "a.example", Group: "g"}} {
		t.Run("group="+link.Group, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w := &fakeWatcher{}
			keys := []Key{key(link, lds, own), key(link, lds, "plain"), key(link, lds, other), key(link, lds, alias)}
			f.c.Watch(w, nil, keys...)
			w.take()
			f.c.Apply(Update{Link: link, TypeURL: lds, Resources: []*Resource{
				res(own, "1", 3), res("plain", "1", 3), res(other, "1", 3),
				withFields(res("aliased", "1", 3), []string{alias}, nil, false),
			}})
			if diff := cmp.Diff([]string{"plain", own}, w.take()); diff != "" {
				t.Errorf("notified (-want +got):\n%s", diff)
			}
			for _, k := range keys[2:] {
				if read := f.c.Lookup(nil, k); read.State != StatePending || read.Res != nil {
					t.Errorf("%s: %v %v, want pending: another authority's name is never stored", k.Name, read.State, read.Res)
				}
			}
			// Neither a removal nor an error of b.example's name lands.
			f.c.Apply(Update{Link: link, TypeURL: lds, Removed: []string{other},
				Errors: []ResourceError{{Name: other, Detail: &statuspb.Status{Code: int32(codes.NotFound)}}}})
			if read := f.c.Lookup(nil, key(link, lds, other)); read.State != StatePending || read.Err != nil {
				t.Errorf("%s after a removal and an error: %v %v, want pending without error", other, read.State, read.Err)
			}
			if got := w.take(); len(got) != 0 {
				t.Errorf("notified of %v", got)
			}
		})
	}
}

// TestRestoreRefusesOtherAuthority: a snapshot record whose key or
// resource names another authority than its link's is not restored.
func TestRestoreRefusesOtherAuthority(t *testing.T) {
	const other = "xdstp://b.example/envoy.config.listener.v3.Listener/x"
	link := LinkID{Authority: "a.example"}
	f := newFixture(t, unbounded)
	rr := f.c.Restore([]SnapshotEntry{
		{Key: key(link, lds, other), Res: res(other, "1", 3)},
		{Key: key(link, lds, "plain"), Res: res(other, "1", 3)},
		{Key: key(link, lds, "kept"), Res: res("kept", "1", 3)},
	})
	if rr.Foreign != 2 || rr.Resources != 1 {
		t.Errorf("restored %+v, want 1 resource and 2 foreign", rr)
	}
	if st := f.c.Lookup(nil, key(link, lds, other)).State; st != StatePending {
		t.Errorf("%s restored: %v", other, st)
	}
}
