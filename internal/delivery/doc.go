// Package delivery is safe delivery at the fan-out point (issue #28, the
// delivery section of the config): it checks and holds back an origin's
// changes before the relay's clients get them, so that one bad or
// destructive origin change stops at the relay, not at the fleet.
//
// It is a client of internal/cache, which asks it, through two small
// interfaces, about each origin change before applying it
// (cache.Validator, cache.RemovalGuard: Delivery implements both), and
// keeps held resources present (cache's deferred removals). internal/relay
// wires it in: New before the cache, SetCache once the cache exists, Run
// as one of the relay's goroutines (release_after), SetConfig on every
// reload; internal/admin serves its pages on the admin listener.
//
// Words, as this package uses them:
//
//   - version: one revision of one resource as an origin sent it,
//     identified by the cache's content version (cache.Resource.Version).
//   - validation: checking a new version against its proto's rules (the
//     generated ValidateAll), once per version (validate.go).
//   - invalid version: one that fails validation. It is refused: never
//     cached nor sent; clients keep what they had; the origin's response
//     is NACKed with the resource's name and the failed field. Remembered
//     (by key and version) so that the origin resending it is refused
//     again without a second validation, log line or count.
//   - hold: a decision to keep something from clients for now, with a
//     reason (the reason label of xds_relay_delivery_held): the deletion
//     guard holds removals; the NACK breaker and waves hold versions.
//   - held removal: an origin change's removal of a resource that the
//     deletion guard holds: the resource stays in the cache and with its
//     clients (new clients are served it too) until released. The cache
//     calls it a deferred removal.
//   - deletion guard: the decision (guard.go) that holds an origin
//     change's removals: more than max_removed_share of a link's
//     resources of one type (types under min_resources exempt), or a
//     watched collection or wildcard emptied.
//   - release: applying held removals (clients get them then): by hand
//     (POST /debug/delivery/release), or by release_after once the origin
//     has gone on without the resources that long (release.go). The
//     origin sending a resource again ends its hold instead.
//   - rollout: one origin change's new versions, from their arrival until
//     accepted (ack_share of the streams they were sent to ACKed them) or
//     max_wait after their last wave opened: while it lasts, the cache
//     keeps each key's last accepted version beside the new one, and the
//     breaker counts NACKs of it (rollout.go).
//   - last accepted version: the version of a resource clients fall back
//     to while a newer one is held from them (internal/cache's
//     entry.accepted).
//   - trip: the NACK breaker holding a version that nack_breaker.clients
//     distinct clients NACKed (breaker.go): held from every client, the
//     origin NACKed once.
//   - wave: a set of clients (a share of the fleet by a stable hash of the
//     node id, or node clusters by pattern) that a rollout reaches before
//     the next (waves.go); a rollout stalls when a wave does not ACK
//     within max_wait.
//   - link: as in internal/upstream, an authority plus, for plain names,
//     the aggregation group: the unit a full-state response replaces, so
//     the unit whose share the guard counts.
//
// See README.md for the files and the metrics, docs/delivery.md for what
// an operator sees.
package delivery
