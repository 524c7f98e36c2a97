package cache

import "sync/atomic"

// maxEncodings bounds the encodings kept per revision: one per variant and
// envelope in practice; names a client spells its own way are encoded for
// it alone past the bound, so no client can grow a shared revision.
const maxEncodings = 8

// Encodings is a revision's memo of its encodings (Resource.Encoding).
type Encodings struct{ v atomic.Value } // an *encodings

// Equal reports true: encodings are derived from the revision, not part
// of what the origin sent (cmp and tests compare revisions by content).
func (Encodings) Equal(Encodings) bool { return true }

// encodings is an immutable list of a revision's encodings; Encoding
// replaces it whole.
type encodings struct{ entries []encoding }

type encoding struct {
	key any
	v   any
}

// Encoding returns r's encoding under key, calling build to make it the
// first time: what is the same for every client receiving this revision
// (one response entry of a variant, say, as the buffer gRPC writes) is
// made once and shared, never written to. Lookups take no lock. build may run more than
// once when callers race; one result is kept. Past maxEncodings keys,
// build runs on every call and nothing more is kept.
func (r *Resource) Encoding(key any, build func() any) any { return EncodingOf(r, key, build) }

// EncodingOf is r.Encoding with a key of type K, compared as a K: a
// lookup does not box the key into an interface (an allocation per
// client and revision sent, on the fan-out's path); only a key kept is.
func EncodingOf[K comparable](r *Resource, key K, build func() any) any {
	raw := r.Encoded.v.Load()
	cur, _ := raw.(*encodings)
	if v, ok := find(cur, key); ok {
		return v
	}
	v := build()
	for {
		if cur.len() >= maxEncodings {
			return v
		}
		next := &encodings{entries: make([]encoding, 0, cur.len()+1)}
		if cur != nil {
			next.entries = append(next.entries, cur.entries...)
		}
		next.entries = append(next.entries, encoding{key: key, v: v})
		if r.Encoded.v.CompareAndSwap(raw, next) {
			return v
		}
		raw = r.Encoded.v.Load()
		cur, _ = raw.(*encodings)
		if kept, ok := find(cur, key); ok {
			return kept
		}
	}
}

// dropEncodings forgets r's encodings: its key is no longer watched, so
// nothing is being sent of it, and what the LRU bounds by serialized bytes
// (Options.MaxBytes) is what an unwatched revision holds. A client
// watching the key again has them made again.
func (r *Resource) dropEncodings() {
	if r != nil && r.Encoded.v.Load() != nil {
		r.Encoded.v.Store((*encodings)(nil))
	}
}

// find returns the encoding of e kept under key (a K equal to it).
func find[K comparable](e *encodings, key K) (any, bool) {
	if e == nil {
		return nil, false
	}
	for _, x := range e.entries {
		if k, ok := x.key.(K); ok && k == key {
			return x.v, true
		}
	}
	return nil, false
}

func (e *encodings) len() int {
	if e == nil {
		return 0
	}
	return len(e.entries)
}
