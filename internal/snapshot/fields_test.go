package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// TestSnapshotFields: the wrapper fields survive a snapshot round trip
// (format 2); a format 1 snapshot is refused as another version; a
// do_not_cache record is refused as corrupt.
func TestSnapshotFields(t *testing.T) {
	f := newFixture(t, unbounded)
	a := key(legacyStream, "a")
	f.c.Watch(watcher{}, nil, a)
	r := res("a", "1", 3)
	r.Aliases = []string{"al"}
	r.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"trace": {Fields: map[string]*structpb.Value{"id": structpb.NewStringValue("m")}},
	}}
	f.c.Apply(cache.Update{Link: legacyStream, TypeURL: lds, Resources: []*cache.Resource{r}})
	es, _ := f.c.SnapshotEntries()
	data, n, _ := Encode(testFP, f.now, es, 0)
	if n != 1 {
		t.Fatalf("%d resources encoded, want 1", n)
	}
	snap, err := Decode(data, testFP)
	if err != nil {
		t.Fatal(err)
	}
	want := f.c.Lookup(nil, a).Res
	if diff := cmp.Diff(want, snap.Entries[0].Res, protocmp.Transform()); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}

	body := bytes.Clone(data[:len(data)-sumLen])
	binary.BigEndian.PutUint32(body[len(magic):], 1)
	if _, err := Decode(resum(body), testFP); !errors.Is(err, ErrVersion) {
		t.Errorf("format version 1: %v, want incompatible", err)
	}

	dnc := res("a", "1", 3)
	dnc.CacheControl = &discoveryv3.Resource_CacheControl{DoNotCache: true}
	dnc.Version = cache.RevisionVersion(dnc)
	data, _, _ = Encode(testFP, f.now, []cache.SnapshotEntry{{Key: a, Res: dnc}}, 0)
	if _, err := Decode(data, testFP); !errors.Is(err, ErrCorrupt) {
		t.Errorf("do_not_cache record: %v, want corrupt", err)
	}
}
