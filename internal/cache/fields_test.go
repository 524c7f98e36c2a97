package cache

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func metadata(v string) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"trace": {Fields: map[string]*structpb.Value{"id": structpb.NewStringValue(v)}},
	}}
}

// withFields returns a copy of r with the origin's wrapper fields.
func withFields(r *Resource, aliases []string, md *corev3.Metadata, doNotCache bool) *Resource {
	cp := *r
	cp.Aliases, cp.Metadata = aliases, md
	if doNotCache {
		cp.CacheControl = &discoveryv3.Resource_CacheControl{DoNotCache: true}
	}
	return &cp
}

// TestFieldsAreContent: a revision that differs from the cached one only
// in aliases, metadata or cache control is a change (a new version,
// watchers notified); the same fields again are not.
func TestFieldsAreContent(t *testing.T) {
	a := key(legacyStream, lds, "a")
	base := withFields(res("a", "1", 3), []string{"x"}, metadata("m1"), false)
	for _, tc := range []struct {
		name       string
		second     *Resource
		wantNotify []string
	}{
		{name: "same fields, new origin version, notify nobody", second: withFields(&Resource{Name: "a", OriginVersion: "2", Body: res("a", "1", 3).Body}, []string{"x"}, metadata("m1"), false)},
		{name: "metadata only notifies", second: withFields(res("a", "1", 3), []string{"x"}, metadata("m2"), false), wantNotify: []string{"a"}},
		{name: "aliases only notify", second: withFields(res("a", "1", 3), []string{"x", "y"}, metadata("m1"), false), wantNotify: []string{"a"}},
		{name: "cache control only notifies", second: withFields(res("a", "1", 3), []string{"x"}, metadata("m1"), true), wantNotify: []string{"a"}},
		{name: "fields dropped notify", second: res("a", "1", 3), wantNotify: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, unbounded)
			w := &fakeWatcher{}
			f.c.Watch(w, nil, a)
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{base}})
			first := f.c.Lookup(nil, a).Res
			w.take()
			f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{tc.second}})
			if diff := cmp.Diff(tc.wantNotify, w.take()); diff != "" {
				t.Errorf("notified (-want +got):\n%s", diff)
			}
			read := f.c.Lookup(nil, a)
			got, st := read.Res, read.State
			if st != StatePresent {
				t.Fatalf("Get: %v", st)
			}
			if changed := got.Version != first.Version; changed != (tc.wantNotify != nil) {
				t.Errorf("version %s → %s: changed %v, want %v", first.Version, got.Version, changed, tc.wantNotify != nil)
			}
			if diff := cmp.Diff(withVersion(tc.second).Metadata, got.Metadata, protocmp.Transform()); tc.wantNotify != nil && diff != "" {
				t.Errorf("metadata kept (-want +got):\n%s", diff)
			}
		})
	}
	// Without fields, the version is go-control-plane's hash of the bytes.
	plain := res("p", "1", 3)
	if got, want := RevisionVersion(plain), ContentVersion(plain.Body); got != want {
		t.Errorf("RevisionVersion without fields = %s, want ContentVersion %s", got, want)
	}
}

// TestSnapshotFields: the wrapper fields are restored with the revision
// (an alias reads as its resource); a do_not_cache revision is never
// collected (TestDoNotCache). The format's side: internal/snapshot.
func TestSnapshotFields(t *testing.T) {
	f := newFixture(t, unbounded)
	w := &fakeWatcher{}
	a := key(legacyStream, lds, "a")
	f.c.Watch(w, nil, a)
	f.c.Apply(Update{Link: legacyStream, TypeURL: lds, Resources: []*Resource{withFields(res("a", "1", 3), []string{"al"}, metadata("m"), false)}})
	es, _ := f.c.SnapshotEntries()
	g := newFixture(t, unbounded)
	g.c.Restore(es)
	if read := g.c.Lookup(nil, key(legacyStream, lds, "al")); read.State != StatePresent || read.Res.Name != "a" {
		t.Errorf("restored alias reads %v %v, want a", read.Res, read.State)
	}
}
