package upstream

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xds-relay/xds-relay/internal/cache"
)

// keepFields copies the origin's Resource wrapper fields the relay passes
// on (aliases, metadata, cache_control) into the revision, as sent: like
// the body, they are shared from the decoded response, never changed.
// The cache versions the revision by them (cache.RevisionVersion).
func keepFields(cr *cache.Resource, w *discoveryv3.Resource) {
	cr.Aliases, cr.Metadata, cr.CacheControl = w.GetAliases(), w.GetMetadata(), w.GetCacheControl()
}
