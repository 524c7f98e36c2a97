package cache

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/propagation"
)

// Wildcard is the Key.Name of the legacy wildcard collection: every resource
// of a type on one upstream link (SotW empty name list, delta "*").
const Wildcard = "*"

// LinkID names one upstream link (package upstream's word for what it
// keeps toward an origin: one stream at a time, across reconnects and
// failovers): an authority, and for legacy (non-xdstp) names the
// aggregation group that shares it. xdstp names are served on the link
// with an empty Group.
type LinkID struct {
	Authority string
	Group     string
}

// Key names what can be cached or watched: one resource, or a collection.
//
// Name is canonical: for xdstp names, xdsname's canonical form (so two
// spellings of one URN are one key); for legacy names, the name itself. A
// collection Key has Name set to Wildcard or to a canonical xdstp glob URL
// ("xdstp://auth/type/dir/*?params"); see IsCollection.
type Key struct {
	Link    LinkID
	TypeURL string
	Name    string
}

// Resource is one revision of a resource as the origin sent it. It is
// immutable once handed to the cache: a change is a new *Resource. Body is
// shared by every client that receives it and is never decoded or
// re-encoded per client.
type Resource struct {
	// Name is the name the origin sent (not necessarily canonical).
	Name string
	// Version is the relay's version of this revision: derived from its
	// bytes and its fields below (RevisionVersion: go-control-plane's
	// HashResource of the bytes when it has none of those fields), so it
	// is the same whatever version string the origin wrapped around them,
	// across relay restarts and origin failover. Set by Cache.Apply; what
	// delta clients are sent.
	Version string
	// OriginVersion is the origin's version of this resource (delta), or the
	// response's version_info (SotW): what the relay tells that origin it
	// holds (initial_resource_versions).
	OriginVersion string
	// Body holds the serialized resource exactly as the origin sent it.
	// Nil only for a heartbeat whose resource is not cached.
	Body *anypb.Any
	// TTL, when set, is how long the resource lives without an update or
	// heartbeat (spec, "TTL").
	TTL *durationpb.Duration
	// Aliases, Metadata and CacheControl are the origin's Resource
	// wrapper fields (delta resources, or SotW resources in the wrapper),
	// kept with the revision and passed on to clients as sent (fields.go).
	// A revision that differs from the cached one in any of them is a
	// change. Read-only, like the rest of the revision.
	Aliases      []string
	Metadata     *corev3.Metadata
	CacheControl *CacheControl
	// Heartbeat marks a revision that only refreshed the TTL: Body and
	// Version are those of the previous revision.
	Heartbeat bool
	// Arrived is when the relay received this revision.
	Arrived time.Time
	// Change is the propagation ledger's record of the origin change that
	// brought this revision (set by Apply; nil when the ledger is off, and
	// for revisions restored from a snapshot or made by a heartbeat): a
	// session that sends the revision settles it (internal/propagation).
	Change *propagation.Change

	// Encoded holds the encodings made of this revision for clients
	// (Encoding), set only once the revision is shared: a copy made
	// before that (a new revision built from another) starts empty. Not
	// content: it compares equal whatever it holds.
	Encoded Encodings
	// Fields memoizes the bytes the wrapper fields hold (size.go), what
	// cache.max_bytes counts of them; set by Apply and Restore. Not
	// content: it compares equal whatever it holds.
	Fields FieldsSize
}

// State says what the relay knows of a key.
type State uint8

const (
	// StatePending: subscribed upstream, the origin has not answered yet.
	StatePending State = iota
	// StatePresent: the resource (or, for a collection, the membership) is known.
	StatePresent
	// StateAbsent: the origin said the resource does not exist, or the relay
	// holds the type's full state and it is not in it. For a collection: the
	// collection is known to be empty.
	StateAbsent
)

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StatePresent:
		return "present"
	case StateAbsent:
		return "absent"
	}
	return "unknown"
}

// Watcher is a downstream session. The cache announces each change (one
// Apply, one expiry sweep, what a new Watch finds) to each watcher as a
// whole: Notify once per changed key the watcher watches (directly, or
// through a collection the key belongs to: then k is the member's key; k is
// the collection key itself when the collection's own state changed, e.g.
// it became known empty), then Flush, at least once, when every key of the
// change has been notified. A watcher builds its responses after Flush,
// never on Notify alone, so one origin change is one response per client.
// Flush may come more than once per change (once per key group); the
// repeats must be cheap. cs is the origin change being announced (nil for
// what a Watch finds or an expiry): a watcher that will send a response for
// it calls cs.Take once and cs.Done after that send.
//
// Both are called with no cache lock taken, must not block and must not
// call back into the cache: mark dirty, poke, return. Watchers are map
// keys: use pointers.
type Watcher interface {
	Notify(k Key)
	Flush(cs *ChangeSet)
}

// Subscriber is the upstream side as the cache sees it. The cache calls it
// without taking its locks; implementations must not block.
//
// names are canonical resource names, canonical glob URLs or Wildcard. node
// is the Node to present to the origin when the link must be opened (the
// first watcher's; later calls may pass nil).
type Subscriber interface {
	Subscribe(s LinkID, node *corev3.Node, typeURL string, names []string)
	Unsubscribe(s LinkID, typeURL string, names []string)
}

// Update is what the origin sent on one link for one type, as the upstream
// side hands it to Apply.
type Update struct {
	Link    LinkID
	TypeURL string
	// Resources are added or changed (or heartbeats). Their cache key is the
	// canonical form of their Name.
	Resources []*Resource
	// Removed are canonical names that no longer exist (delta
	// removed_resources). A glob URL here means the collection is empty.
	Removed []string
	// Complete lists subscriptions (canonical names, glob URLs, Wildcard)
	// that this response answers in full: a pending name among them that is
	// not in Resources becomes StateAbsent, and a collection among them
	// becomes known with the members the cache holds.
	Complete []string
	// FullState says Resources is every resource of TypeURL on Link (SotW
	// Listener/Cluster, or a wildcard answer): anything else cached for the
	// link and type becomes StateAbsent, and every collection of it
	// becomes known, except what Unanswered lists.
	FullState bool
	// Unanswered lists canonical names and collections (glob URLs,
	// Wildcard) that a FullState response does not speak for: subscribed
	// after the request it answers. They keep their state: absence is
	// inferred only for a name the answered request held.
	Unanswered []string
	// Errors are the origin's resource_errors (xRFC TP3), each under a
	// canonical name, glob URL or Wildcard: NOT_FOUND makes the key absent
	// (as Removed does) and keeps the origin's status with it; any other
	// code keeps the key's state (a cached revision stays) and records the
	// status beside it, until a revision, a removal or an answer clears it.
	Errors []ResourceError
	// Arrived is when the relay received the change (zero: when Apply
	// starts); the fan-out duration is measured from it.
	Arrived time.Time
	// Unguarded: the relay's own change (the links of an authority a
	// reload removed), not an origin's: the RemovalGuard is not asked, and
	// what it removes is removed, deferred or not (deferred.go).
	Unguarded bool
}

// ResourceError is an error an origin sent for one key (xRFC TP3
// resource_errors), or one the relay makes for a link no origin answers
// (SetLinkError).
type ResourceError struct {
	// Name is canonical: a resource name, a glob URL or Wildcard.
	Name string
	// Detail is the status as the origin sent it; shared by every client
	// that is sent it, never modified.
	Detail *statuspb.Status
}
