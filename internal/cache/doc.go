// Package cache is the shared cache between downstream sessions and
// upstream links: every resource once, by canonical key, with the bytes
// exactly as the origin sent them, and who watches what.
//
// Words, as this package uses them:
//
//   - key (Key): what can be cached or watched: an upstream link
//     (LinkID: authority and aggregation group; package upstream keeps
//     one stream toward an origin for each), a type URL and a
//     canonical name. The name is one resource's, or a collection's.
//   - collection: a key that stands for a set of resources: the legacy
//     Wildcard (every resource of a type on one link) or an xdstp glob
//     ("xdstp://auth/type/dir/*"). Its members are the present resources
//     it covers; it is pending until the origin answers it, then known
//     (present, or absent when empty).
//   - entry: what the cache holds for one key: its state (pending, present,
//     absent), its current revision, its TTL, whether it is subscribed
//     upstream and whether it waits in the LRU (nobody watches it).
//   - revision (Resource): one version of a resource as the origin sent
//     it (body, TTL, and the origin's aliases, metadata and cache control),
//     immutable once applied; a change is a new *Resource. Its Version
//     comes from its bytes and those fields (RevisionVersion), not from
//     the origin.
//   - alias: another name of a resource (Resource.Aliases); a watched
//     alias key reads as the resource that lists it (aliases.go).
//   - watcher (Watcher): a downstream session. It watches keys; the cache
//     tells it which of them changed (Notify) and when a change is whole
//     (Flush), and the session reads current state back (Lookup,
//     LookupMembers: lookup.go).
//   - lookup (lookup.go): one read of a key, under one lock: everything a
//     response is built from (revision, state, error, rollout) and, for
//     the watcher reading it, whether the revision is withheld from it.
//   - owed (refetch.go): a watcher that started watching a cached
//     do_not_cache revision is owed a fresh copy from the origin; until it
//     comes, that revision is withheld from it (KeyLookup.Withheld).
//   - change set (ChangeSet): one origin change (one Apply) as every
//     watcher of it sees it: announced as a whole, carrying its new
//     revisions (Revisions), and timing the change until the last watcher
//     has sent it.
//   - subscriber (Subscriber): the upstream side, told which keys to
//     subscribe and unsubscribe.
//   - screening (screen.go): what an Apply asks before it changes
//     anything, when package delivery's checks are set: the Validator,
//     about each new revision (content that differs from the cached one);
//     the RemovalGuard, about the update's removals.
//   - refused revision: a new revision the Validator refused: left out of
//     its update (not cached, never announced); its key keeps what it had,
//     also in a FullState update. Apply returns the refusals (Applied).
//   - deferred removal (deferred.go): the removal of a present resource
//     that the RemovalGuard deferred: the entry stays present, with its
//     revision, for watchers old and new, until released
//     (ReleaseDeferred), sent again by the origin, lapsed, evicted, or
//     removed by an Unguarded update. (Package delivery calls a deferred
//     removal a held removal: the deletion guard's hold.)
//   - rollout (rollout.go): a new revision the Gate (package delivery)
//     watches until it settles: meanwhile its key keeps the last accepted
//     revision beside it (at most two per key), and the revision may be
//     held back (Hold: the NACK breaker's, or a wave's) from some clients,
//     who are served the last accepted one (Rollout.Serve). "Hold" and
//     "held" mean this, or a deferred removal, and nothing else here: a
//     key somebody watches is watched (never evicted), a do_not_cache
//     fetch the refetch interval puts off is delayed.
//   - snapshot entry (SnapshotEntry): one key as warm restart keeps it: a
//     present revision with its origin version and TTL expiry, or a known
//     collection. SnapshotEntries collects them, Restore puts them back
//     before the first Watch, Generation says whether anything changed
//     (snapshotstate.go). That is all the cache knows of warm restart: the
//     file, its format and when it is written are package snapshot's.
//
// See README.md for the files, the locking and the metrics.
package cache
