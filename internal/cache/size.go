package cache

import (
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// What cache.max_bytes counts (Options.MaxBytes, xds_relay_cache_bytes):
// every byte a key holds, not only a revision's body. An origin controls
// all of it (a 144-byte body may carry 256 KiB of metadata), so all of it
// counts. A present resource's size (entry.size) is
//
//	len(body) + len(body's type URL)
//	+ len(name) + len(version) + len(origin version)
//	+ the wrapper fields: each alias's bytes + 16, the metadata's size in
//	  memory (protoBytes: strings and bytes by length, + 16 each; 8 per
//	  scalar and pointer; 64 per message; 48 per map or list, + 16 per map
//	  entry), 48 for cache_control
//	+ 48 for a TTL
//	+ len(key name) when the key's name is not the revision's (an xdstp
//	  name's canonical form)
//	+ revisionOverhead
//	+ the key's resource error (errBytes)
//
// and a key without a revision (pending, absent, a collection) counts its
// resource error alone (its entry counts toward max_resources).
// Encodings made for clients are not counted: a revision nobody watches
// keeps none (encoding.go).

// revisionOverhead estimates the fixed bytes of one cached revision: the
// Resource and its Any, the entry, and their slots in the cache's indexes
// (entries, byType, globMembers, the LRU list and map). Measured by
// TestMaxBytesBoundsLiveHeap (10,000 revisions in the LRU, a 16-byte body
// and an 11-byte name each): 978 bytes of live heap per revision, 977
// counted.
const revisionOverhead = 832

// FieldsSize memoizes what a revision's wrapper fields hold in memory
// (protoBytes of its metadata, its aliases, cache_control), set once
// before the revision is shared (Apply, Restore). Not content: it compares
// equal whatever it holds.
type FieldsSize struct{ n int64 }

// Equal reports true: the memo is derived from the revision.
func (FieldsSize) Equal(FieldsSize) bool { return true }

// fieldsBytes is what r's wrapper fields hold: the memo, or computed.
func (r *Resource) fieldsBytes() int64 {
	if r.Fields.n > 0 || !r.HasFields() {
		return r.Fields.n
	}
	return computeFieldsBytes(r)
}

func computeFieldsBytes(r *Resource) int64 {
	var n int64
	for _, a := range r.Aliases {
		n += 16 + int64(len(a))
	}
	if len(r.Aliases) > 0 {
		n += 24 // the slice
	}
	if r.Metadata != nil {
		n += protoBytes(r.Metadata.ProtoReflect())
	}
	if r.CacheControl != nil {
		n += 48
	}
	return n
}

// sized returns r with its FieldsSize memo set: r itself when it has no
// fields or the memo is set, else a copy (revisions are immutable once
// shared; this runs before).
func sized(r *Resource) *Resource {
	if r == nil || !r.HasFields() || r.Fields.n > 0 {
		return r
	}
	cp := *r
	cp.Fields.n = max(computeFieldsBytes(r), 1)
	return &cp
}

// Size is the bytes revision r holds, as cache.max_bytes counts it (above),
// without its key's.
func (r *Resource) Size() int {
	if r == nil {
		return 0
	}
	n := int64(len(r.Body.GetValue())+len(r.Body.GetTypeUrl())) +
		int64(len(r.Name)+len(r.Version)+len(r.OriginVersion)) +
		r.fieldsBytes() + revisionOverhead
	if r.TTL != nil {
		n += 48
	}
	return int(n)
}

// keyBytes is what a present revision adds for its key: the key's name
// when it is not the revision's own (a canonical form kept beside it).
func keyBytes(k Key, r *Resource) int64 {
	if r == nil || k.Name == r.Name {
		return 0
	}
	return int64(len(k.Name))
}

// errBytes is what a key's resource error holds (its message and
// details, kept until cleared).
func errBytes(err *statuspb.Status) int64 {
	if err == nil {
		return 0
	}
	return 64 + int64(proto.Size(err))
}

// protoBytes estimates what message m holds in memory: its set fields
// walked, strings and bytes by length (shared nowhere: decoded from the
// wire, each is its own allocation).
func protoBytes(m protoreflect.Message) int64 {
	n := int64(64)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			n += 48
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				n += 16 + valueBytes(fd.MapKey(), k.Value()) + valueBytes(fd.MapValue(), mv)
				return true
			})
		case fd.IsList():
			n += 48
			l := v.List()
			for i := range l.Len() {
				n += valueBytes(fd, l.Get(i))
			}
		default:
			n += valueBytes(fd, v)
		}
		return true
	})
	return n
}

// valueBytes is one field value's share of protoBytes.
func valueBytes(fd protoreflect.FieldDescriptor, v protoreflect.Value) int64 {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return 16 + int64(len(v.String()))
	case protoreflect.BytesKind:
		return 24 + int64(len(v.Bytes()))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return 8 + protoBytes(v.Message())
	}
	return 8
}

// resizeLocked brings the byte total and the LRU's byte count in step
// with what e holds now (entry.size): called whenever its revision or its
// resource error changes, and when it is dropped (then it holds nothing).
func (c *Cache) resizeLocked(e *entry) {
	s := e.size()
	if c.entries[e.key] != e {
		s = 0 // dropped
	}
	if d := s - e.counted; d != 0 {
		c.totals.Bytes += d
		c.m.bytes.Add(float64(d))
		e.counted = s
	}
	if e.inLRU && e.lruBytes != s {
		c.lruBytes += s - e.lruBytes
		e.lruBytes = s
	}
}
