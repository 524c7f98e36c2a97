package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// The snapshot format: what the cache had, on disk, so a restarted relay
// serves it at once (see snapshotter.go for when it is written and read).
//
//	header   magic "XDSRSNAP" (8 bytes) | format version (uint32, big endian)
//	         | config fingerprint (32 bytes) | written at (int64 Unix ns)
//	records  one per entry: length (uvarint) | record
//	trailer  SHA-256 of everything before it (32 bytes)
//
// A record is a kind byte (1: a present resource, 2: a collection the
// origin had answered), the key (authority, group, type URL, canonical
// name) and, for a resource: the name the origin sent, the content
// version, the revision's origin version, the entry's origin version (what
// initial_resource_versions carries), the body's type URL and bytes, the
// TTL (ns, 0: none), the absolute TTL expiry (Unix ns, 0: none), when
// the revision arrived (Unix ns) and, since format version 2, the
// revision's wrapper fields (aliases, metadata, cache control: their
// deterministic encoding as a Resource message; empty: none). Strings and
// bytes are a uvarint length and the bytes; numbers are varints.
//
// Decode checks the whole file (magic, version, checksum, fingerprint,
// every record, every content version against its bytes and fields)
// before it returns anything: a snapshot is used whole or not at all.

// FormatVersion is the version of the format this code writes and reads.
// 2: resource records end with the wrapper fields (version 1's are
// refused as another version: the relay starts without them).
const FormatVersion uint32 = 2

const (
	magic     = "XDSRSNAP"
	headerLen = len(magic) + 4 + sha256.Size + 8
	sumLen    = sha256.Size

	recordResource   byte = 1
	recordCollection byte = 2
)

// Fingerprint identifies the configuration a snapshot was written under:
// a hash of what decides what a key means (authorities, their origins and
// transport, aggregation rules, the node). A snapshot of another
// fingerprint is not loaded.
type Fingerprint [sha256.Size]byte

// Snapshot is a decoded snapshot.
type Snapshot struct {
	Fingerprint Fingerprint
	Written     time.Time
	Entries     []cache.SnapshotEntry
}

// Encode encodes entries in their order, resources first, up to
// maxBytes for the whole file (maxBytes <= 0: no bound). Resources that
// do not fit are left out from the first that does not fit on, and then
// no collection is written either (a collection missing a member would
// make the member read as absent): truncated reports that. The result is
// deterministic for the same arguments.
func Encode(fp Fingerprint, written time.Time, entries []cache.SnapshotEntry, maxBytes int64) (data []byte, resources int, truncated bool) {
	est := headerLen + sumLen
	for _, e := range entries {
		est += 64 + len(e.Key.Link.Authority) + len(e.Key.Link.Group) + len(e.Key.TypeURL) + len(e.Key.Name)
		if r := e.Res; r != nil {
			est += len(r.Name) + len(r.Version) + len(r.OriginVersion) + len(e.OriginVersion) + len(r.Body.GetTypeUrl()) + len(r.Body.GetValue())
			if r.HasFields() {
				est += 64 * (1 + len(r.Aliases))
			}
		}
	}
	if maxBytes > 0 {
		est = int(min(int64(est), maxBytes))
	}
	buf := make([]byte, 0, est)
	buf = append(buf, magic...)
	buf = binary.BigEndian.AppendUint32(buf, FormatVersion)
	buf = append(buf, fp[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(written.UnixNano()))
	fits := func(rec []byte) bool {
		n := int64(len(buf)) + int64(uvarintLen(uint64(len(rec)))) + int64(len(rec)) + sumLen
		return maxBytes <= 0 || n <= maxBytes
	}
	var rec []byte
	for _, e := range entries {
		if e.Collection || e.Res == nil {
			continue
		}
		rec = appendResourceRecord(rec[:0], e)
		if !fits(rec) {
			truncated = true
			break
		}
		buf = binary.AppendUvarint(buf, uint64(len(rec)))
		buf = append(buf, rec...)
		resources++
	}
	if !truncated {
		mark := len(buf)
		for _, e := range entries {
			if !e.Collection {
				continue
			}
			rec = appendKey(append(rec[:0], recordCollection), e.Key)
			if !fits(rec) {
				buf, truncated = buf[:mark], true
				break
			}
			buf = binary.AppendUvarint(buf, uint64(len(rec)))
			buf = append(buf, rec...)
		}
	}
	sum := sha256.Sum256(buf)
	return append(buf, sum[:]...), resources, truncated
}

func appendResourceRecord(b []byte, e cache.SnapshotEntry) []byte {
	b = appendKey(append(b, recordResource), e.Key)
	r := e.Res
	b = appendString(b, r.Name)
	b = appendString(b, r.Version)
	b = appendString(b, r.OriginVersion)
	b = appendString(b, e.OriginVersion)
	b = appendString(b, r.Body.GetTypeUrl())
	b = binary.AppendUvarint(b, uint64(len(r.Body.GetValue())))
	b = append(b, r.Body.GetValue()...)
	var ttl int64
	if r.TTL != nil {
		ttl = int64(r.TTL.AsDuration())
	}
	b = binary.AppendVarint(b, ttl)
	b = binary.AppendVarint(b, unixNano(e.Expires))
	b = binary.AppendVarint(b, unixNano(r.Arrived))
	fields := cache.EncodeFields(r)
	b = binary.AppendUvarint(b, uint64(len(fields)))
	return append(b, fields...)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func appendKey(b []byte, k cache.Key) []byte {
	b = appendString(b, k.Link.Authority)
	b = appendString(b, k.Link.Group)
	b = appendString(b, k.TypeURL)
	return appendString(b, k.Name)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Decode checks and decodes a whole snapshot. want is the running
// config's fingerprint. Errors wrap ErrCorrupt (not a snapshot,
// truncated, checksum or record invalid), ErrVersion (another
// format version) or ErrForeign (another config); nothing is
// returned with an error.
func Decode(data []byte, want Fingerprint) (*Snapshot, error) {
	if len(data) < len(magic) || string(data[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: no snapshot magic at the start", ErrCorrupt)
	}
	if len(data) < headerLen+sumLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than header and checksum", ErrCorrupt, len(data))
	}
	if v := binary.BigEndian.Uint32(data[len(magic):]); v != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d, this relay reads %d", ErrVersion, v, FormatVersion)
	}
	body, sum := data[:len(data)-sumLen], data[len(data)-sumLen:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch (truncated or modified)", ErrCorrupt)
	}
	s := &Snapshot{}
	off := len(magic) + 4
	copy(s.Fingerprint[:], body[off:off+sha256.Size])
	off += sha256.Size
	s.Written = fromUnixNano(int64(binary.BigEndian.Uint64(body[off:])))
	off += 8
	if s.Fingerprint != want {
		return nil, fmt.Errorf("%w: written under a config with fingerprint %x, running %x", ErrForeign, s.Fingerprint[:6], want[:6])
	}
	d := decoder{b: body[off:]}
	seen := make(map[cache.Key]struct{})
	for i := 0; len(d.b) > 0; i++ {
		n := d.uvarint()
		if d.err != nil || n > uint64(len(d.b)) {
			return nil, fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		rd := decoder{b: d.b[:n]}
		d.b = d.b[n:]
		e, err := rd.entry()
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		if _, dup := seen[e.Key]; dup {
			return nil, fmt.Errorf("%w: record %d: key %s %s listed twice", ErrCorrupt, i, e.Key.TypeURL, e.Key.Name)
		}
		seen[e.Key] = struct{}{}
		s.Entries = append(s.Entries, e)
	}
	return s, nil
}

// decoder reads the primitives of a record; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("bad %s", what)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string(what string) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail(what + " length")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) entry() (cache.SnapshotEntry, error) {
	var e cache.SnapshotEntry
	if len(d.b) == 0 {
		return e, fmt.Errorf("empty record")
	}
	kind := d.b[0]
	d.b = d.b[1:]
	e.Key = cache.Key{
		Link:    cache.LinkID{Authority: d.string("authority"), Group: d.string("group")},
		TypeURL: d.string("type URL"),
		Name:    d.string("name"),
	}
	switch kind {
	case recordCollection:
		e.Collection = true
		if d.err == nil && !e.Key.IsCollection() {
			return e, fmt.Errorf("collection record for %q, not a collection name", e.Key.Name)
		}
	case recordResource:
		r, err := d.resource(&e)
		if err != nil {
			return e, err
		}
		e.Res = r
	default:
		return e, fmt.Errorf("unknown record kind %d", kind)
	}
	if d.err != nil {
		return e, d.err
	}
	if len(d.b) != 0 {
		return e, fmt.Errorf("%d bytes left over", len(d.b))
	}
	return e, nil
}

// resource reads the rest of a resource record for e (its entry origin
// version and expiry into e) and checks it; nil, nil when a primitive was
// bad (d.err says which).
func (d *decoder) resource(e *cache.SnapshotEntry) (*cache.Resource, error) {
	r := &cache.Resource{
		Name:          d.string("resource name"),
		Version:       d.string("version"),
		OriginVersion: d.string("origin version"),
	}
	e.OriginVersion = d.string("entry origin version")
	r.Body = &anypb.Any{TypeUrl: d.string("body type URL"), Value: []byte(d.string("body"))}
	ttl := d.varint()
	e.Expires = fromUnixNano(d.varint())
	r.Arrived = fromUnixNano(d.varint())
	fields := d.string("resource fields")
	if d.err != nil {
		return nil, nil
	}
	if err := cache.DecodeFields([]byte(fields), r); err != nil {
		return nil, fmt.Errorf("%q: %v", e.Key.Name, err)
	}
	if r.DoNotCache() {
		return nil, fmt.Errorf("%q is marked do_not_cache: never written to a snapshot", e.Key.Name)
	}
	if ttl < 0 {
		return nil, fmt.Errorf("negative TTL for %q", e.Key.Name)
	}
	if ttl > 0 {
		r.TTL = durationpb.New(time.Duration(ttl))
	}
	if err := checkResource(e.Key, r); err != nil {
		return nil, err
	}
	return r, nil
}

// checkResource checks a resource against its key: its name is the key's
// (canonical) name, its body the key's type, its content version its own.
func checkResource(k cache.Key, r *cache.Resource) error {
	if canon, err := cache.CanonicalName(r.Name); err != nil || canon != k.Name || k.IsCollection() {
		return fmt.Errorf("resource name %q does not match key %q", r.Name, k.Name)
	}
	if r.Body.GetTypeUrl() != k.TypeURL {
		return fmt.Errorf("body of %q is a %s, key type %s", k.Name, r.Body.GetTypeUrl(), k.TypeURL)
	}
	if v := cache.RevisionVersion(r); v != r.Version {
		return fmt.Errorf("content version of %q is %s, recorded %s", k.Name, v, r.Version)
	}
	return nil
}
