package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xds-relay/xds-relay/internal/cache"
)

func encodeFixture(t *testing.T, f *fixture) []byte {
	t.Helper()
	es, _ := f.c.SnapshotEntries()
	data, n, truncated := Encode(testFP, f.now, es, 0)
	if n != 4 || truncated {
		t.Fatalf("Encode: %d resources, truncated %v; want 4, false", n, truncated)
	}
	return data
}

// TestSnapshotRoundTrip: what the cache collected comes back from the
// format as it was (revisions, origin versions, TTL expiries), and a
// fresh cache restores all of it. What a cache restores from those
// entries (Get, Versions, hits, subscriptions, TTLs) is the cache's
// TestSnapshotRestore.
func TestSnapshotRoundTrip(t *testing.T) {
	f := snapFixture(t)
	data := encodeFixture(t, f)
	snap, err := Decode(data, testFP)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Written.Equal(f.now) {
		t.Errorf("written %v, want %v", snap.Written, f.now)
	}
	es, _ := f.c.SnapshotEntries()
	if diff := cmp.Diff(es, snap.Entries, protocmp.Transform()); diff != "" {
		t.Errorf("entries (-collected +decoded):\n%s", diff)
	}

	g := newFixture(t, unbounded)
	g.now = f.now.Add(30 * time.Second)
	rr := g.c.Restore(snap.Entries)
	if diff := cmp.Diff(cache.RestoreResult{Resources: 4, Collections: 2}, rr); diff != "" {
		t.Errorf("restore (-want +got):\n%s", diff)
	}
}

func TestSnapshotEncodeBound(t *testing.T) {
	f := snapFixture(t)
	es, _ := f.c.SnapshotEntries()
	full, _, _ := Encode(testFP, f.now, es, 0)
	for _, max := range []int64{int64(len(full)), int64(len(full)) - 1, 200, 1} {
		data, n, truncated := Encode(testFP, f.now, es, max)
		if int64(len(data)) > max && n > 0 {
			t.Errorf("max %d: %d bytes", max, len(data))
		}
		again, _, _ := Encode(testFP, f.now, es, max)
		if !bytes.Equal(data, again) {
			t.Errorf("max %d: not deterministic", max)
		}
		if truncated != (max < int64(len(full))) {
			t.Errorf("max %d: truncated %v", max, truncated)
		}
		snap, err := Decode(data, testFP)
		if err != nil {
			t.Fatalf("max %d: %v", max, err)
		}
		colls := 0
		for i, e := range snap.Entries {
			if e.Collection {
				colls++
				continue
			}
			if e.Key != es[i].Key {
				t.Errorf("max %d: entry %d is %s, want the prefix of the entries", max, i, e.Key.Name)
			}
		}
		if truncated && colls > 0 {
			t.Errorf("max %d: truncated snapshot holds %d collections", max, colls)
		}
		if len(snap.Entries)-colls != n {
			t.Errorf("max %d: %d resources decoded, %d reported", max, len(snap.Entries)-colls, n)
		}
	}
}

func TestSnapshotCorruptionRejected(t *testing.T) {
	f := snapFixture(t)
	data := encodeFixture(t, f)
	versionAt := len(magic)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		snap, err := Decode(bad, testFP)
		if err == nil || snap != nil {
			t.Fatalf("byte %d flipped: decoded (%v)", i, err)
		}
		want := ErrCorrupt
		if i >= versionAt && i < versionAt+4 {
			want = ErrVersion
		}
		if !errors.Is(err, want) {
			t.Errorf("byte %d flipped: %v, want %v", i, err, want)
		}
	}
	for n := range len(data) {
		if snap, err := Decode(data[:n], testFP); !errors.Is(err, ErrCorrupt) || snap != nil {
			t.Fatalf("truncated to %d bytes: %v, want corrupt", n, err)
		}
	}
	if _, err := Decode(append(bytes.Clone(data), 0), testFP); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a byte appended: %v, want corrupt", err)
	}
}

func TestSnapshotForeignAndVersion(t *testing.T) {
	f := snapFixture(t)
	data := encodeFixture(t, f)
	if _, err := Decode(data, Fingerprint{9}); !errors.Is(err, ErrForeign) {
		t.Errorf("other fingerprint: %v, want foreign", err)
	}
	// A later format version, with a valid checksum.
	body := bytes.Clone(data[:len(data)-sumLen])
	binary.BigEndian.PutUint32(body[len(magic):], FormatVersion+1)
	if _, err := Decode(resum(body), testFP); !errors.Is(err, ErrVersion) {
		t.Errorf("format version %d: %v, want incompatible", FormatVersion+1, err)
	}
	// A record whose content version does not match its bytes, checksum valid.
	body = bytes.Clone(data[:len(data)-sumLen])
	i := bytes.Index(body, []byte(cache.ContentVersion(mustGet(t, f, "a").Body)))
	body[i] ^= 1
	if _, err := Decode(resum(body), testFP); !errors.Is(err, ErrCorrupt) {
		t.Errorf("content version mismatch: %v, want corrupt", err)
	}
	if _, err := Decode([]byte("{\"json\": true}"), testFP); !errors.Is(err, ErrCorrupt) {
		t.Errorf("another file: %v, want corrupt", err)
	}
}

func mustGet(t *testing.T, f *fixture, name string) *cache.Resource {
	t.Helper()
	read := f.c.Lookup(nil, key(legacyStream, name))
	r, st := read.Res, read.State
	if st != cache.StatePresent {
		t.Fatalf("%s: %v", name, st)
	}
	return r
}

func resum(body []byte) []byte {
	return append(body, sumOf(body)...)
}

func sumOf(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func FuzzDecodeSnapshot(f *testing.F) {
	c := cache.New(unbounded)
	defer c.Close()
	c.Apply(cache.Update{Link: legacyStream, TypeURL: lds, Resources: []*cache.Resource{res("a", "1", 10), res("b", "2", 5)}})
	es, _ := c.SnapshotEntries()
	data, _, _ := Encode(testFP, time.Unix(5, 0), es, 0)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := Decode(b, testFP)
		if (err == nil) != (snap != nil) {
			t.Fatalf("snapshot %v with error %v", snap, err)
		}
		if err == nil {
			g := cache.New(unbounded)
			g.Restore(snap.Entries)
			g.Close()
		}
		// The checksum is over the body: a fuzzed body with a fixed-up
		// checksum exercises the record decoder.
		if len(b) > headerLen {
			body := append(bytes.Clone(data[:headerLen]), b[headerLen:]...)
			if snap, err := Decode(resum(body), testFP); err == nil {
				g := cache.New(unbounded)
				g.Restore(snap.Entries)
				g.Close()
			}
		}
	})
}

func TestSnapshotFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snap")
	if err := WriteFile(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, 3)
	if err != nil || string(got) != "two" {
		t.Errorf("read %q, %v; want two", got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d files, want only the snapshot (no temporary left)", len(ents))
	}
	if _, err := ReadFile(path, 2); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the bound: %v, want too large", err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "snap"), nil); err == nil {
		t.Error("write into a missing directory: no error")
	}
}

// TestSnapshotterLoadResults: every way a snapshot is not loaded leaves
// the cache empty and is counted by its reason; a good one is loaded.
func TestSnapshotterLoadResults(t *testing.T) {
	f := snapFixture(t)
	good := encodeFixture(t, f)
	badVersion := bytes.Clone(good[:len(good)-sumLen])
	binary.BigEndian.PutUint32(badVersion[len(magic):], 99)
	for _, tc := range []struct {
		name  string
		file  []byte // nil: no file
		mode  os.FileMode
		make  func(path string) error // makes what is at the path instead of file
		fp    Fingerprint
		max   int64
		want  LoadResult
		wantN int
	}{
		{name: "absent", fp: testFP, want: LoadAbsent},
		{name: "good", file: good, fp: testFP, want: LoadLoaded, wantN: 4},
		{name: "corrupt", file: append(bytes.Clone(good[:100]), good[101:]...), fp: testFP, want: LoadCorrupt},
		{name: "empty file", file: []byte{}, fp: testFP, want: LoadCorrupt},
		{name: "other version", file: resum(badVersion), fp: testFP, want: LoadIncompatible},
		{name: "other config", file: good, fp: Fingerprint{7}, want: LoadForeign},
		{name: "too large", file: good, fp: testFP, max: 10, want: LoadTooLarge},
		{name: "a directory", make: func(p string) error { return os.Mkdir(p, 0o700) }, fp: testFP, want: LoadUntrusted},
		{name: "a FIFO", make: func(p string) error { return syscall.Mkfifo(p, 0o600) }, fp: testFP, want: LoadUntrusted},
		{name: "group writable", file: good, mode: 0o660, fp: testFP, want: LoadUntrusted},
		{name: "writable by anyone", file: good, mode: 0o606, fp: testFP, want: LoadUntrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "snap")
			if tc.file != nil {
				if err := os.WriteFile(path, tc.file, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mode != 0 {
				if err := os.Chmod(path, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			if tc.make != nil {
				if err := tc.make(path); err != nil {
					t.Fatal(err)
				}
			}
			g := newFixture(t, unbounded)
			reg := prometheus.NewRegistry()
			s := New(g.c, Options{Path: path, Interval: time.Hour, MaxBytes: tc.max, Fingerprint: tc.fp, Registry: reg, Now: func() time.Time { return g.now }})
			got, rr := s.Load()
			if got != tc.want || rr.Resources != tc.wantN {
				t.Errorf("Load: %s, %d resources; want %s, %d", got, rr.Resources, tc.want, tc.wantN)
			}
			if n := testutil.ToFloat64(s.m.loads.WithLabelValues(string(tc.want))); n != 1 {
				t.Errorf("loads_total{result=%s} = %v, want 1", tc.want, n)
			}
			if tc.want != LoadLoaded && g.c.Stats().Resources != 0 {
				t.Errorf("cache holds %v resources after a failed load", g.c.Stats().Resources)
			}
			wantAge := -1.0
			if tc.want == LoadLoaded {
				wantAge = 0 // written at f.now, which is g.now
			}
			if a := s.age(); a != wantAge {
				t.Errorf("age %v, want %v", a, wantAge)
			}
		})
	}
}

// TestSnapshotterWrites: Final writes only once Run ran, and only what
// changed; a write replaces the file whole.
func TestSnapshotterWrites(t *testing.T) {
	f := snapFixture(t)
	path := filepath.Join(t.TempDir(), "snap")
	s := New(f.c, Options{Path: path, Interval: time.Hour, Fingerprint: testFP, Now: func() time.Time { return f.now }})
	s.Load()
	s.Final()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Final before Run wrote a snapshot: %v", err)
	}
	s.started.Store(true) // as Run does
	s.Final()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Final: %v", err)
	}
	if !bytes.Equal(data, encodeFixture(t, f)) {
		t.Error("Final wrote something else than the cache's snapshot")
	}
	if n := testutil.ToFloat64(s.m.writes.WithLabelValues("ok")); n != 1 {
		t.Errorf("writes ok %v, want 1", n)
	}
	s.Final() // unchanged: not rewritten
	if n := testutil.ToFloat64(s.m.writes.WithLabelValues("ok")); n != 1 {
		t.Errorf("writes ok %v after an unchanged Final, want 1", n)
	}
	f.c.Apply(cache.Update{Link: legacyStream, TypeURL: lds, Resources: []*cache.Resource{res("d", "5", 5)}})
	s.Final()
	if n := testutil.ToFloat64(s.m.writes.WithLabelValues("ok")); n != 2 {
		t.Errorf("writes ok %v after a change, want 2", n)
	}
	// A reload that changes the config's fingerprint: rewritten under it.
	other := Fingerprint{4, 5}
	s.SetFingerprint(other)
	s.Final()
	if n := testutil.ToFloat64(s.m.writes.WithLabelValues("ok")); n != 3 {
		t.Errorf("writes ok %v after a new fingerprint, want 3", n)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(data, other); err != nil {
		t.Errorf("snapshot after SetFingerprint: %v", err)
	}
}
