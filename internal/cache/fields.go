package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// The origin's Resource wrapper fields beside the body (aliases, metadata,
// cache_control): kept with each revision, part of its version
// (RevisionVersion), written to the snapshot (EncodeFields, DecodeFields),
// passed on to clients. Two of them change what the cache does: aliases
// (aliases.go) and cache_control.do_not_cache (refetch.go).

// CacheControl is the origin's Resource.cache_control.
type CacheControl = discoveryv3.Resource_CacheControl

// HasFields reports whether r carries aliases, metadata or cache control.
func (r *Resource) HasFields() bool {
	return r != nil && (len(r.Aliases) > 0 || r.Metadata != nil || r.CacheControl != nil)
}

// DoNotCache reports whether the origin marked r cache_control.do_not_cache.
func (r *Resource) DoNotCache() bool {
	return r != nil && r.CacheControl.GetDoNotCache()
}

// RevisionVersion is the relay's version of revision r: ContentVersion of
// its body when it carries none of the wrapper fields (go-control-plane's
// own delta version of those bytes), otherwise a hex SHA-256 of the body
// and the fields' deterministic encoding, so a change of metadata alone is
// a new version.
func RevisionVersion(r *Resource) string {
	if !r.HasFields() {
		return ContentVersion(r.Body)
	}
	body := r.Body.GetValue()
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(body))))
	h.Write(body)
	h.Write(EncodeFields(r))
	return hex.EncodeToString(h.Sum(nil))
}

// EncodeFields is the deterministic encoding of r's wrapper fields (as a
// Resource message holding only them); nil when it has none. It is part of
// RevisionVersion, and what a snapshot record stores (package snapshot).
func EncodeFields(r *Resource) []byte {
	if !r.HasFields() {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&discoveryv3.Resource{
		Aliases: r.Aliases, Metadata: r.Metadata, CacheControl: r.CacheControl,
	})
	if err != nil {
		// Cannot happen for messages decoded from the wire; the body
		// still versions the revision.
		return nil
	}
	return b
}

// DecodeFields sets r's wrapper fields from EncodeFields' bytes (a
// snapshot record's).
func DecodeFields(b []byte, r *Resource) error {
	if len(b) == 0 {
		return nil
	}
	var w discoveryv3.Resource
	if err := proto.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("resource fields: %w", err)
	}
	r.Aliases, r.Metadata, r.CacheControl = w.GetAliases(), w.GetMetadata(), w.GetCacheControl()
	return nil
}
