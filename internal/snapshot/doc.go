// Package snapshot is warm restart: it keeps the cache's contents in a
// file (cache.snapshot_path) and puts them back when the relay starts, so
// clients are served at once, even while every origin is down, and the
// upstream asks the origins only for what changed.
//
// It is a client of internal/cache, through the cache's collect/restore
// API only (Cache.SnapshotEntries, Cache.Restore, Cache.Generation, and
// the revision helpers CanonicalName, RevisionVersion, EncodeFields and
// DecodeFields); internal/relay wires it in: FromConfig, Load before
// anything serves, Run as one of the relay's goroutines, Final at Close
// (after the upstream stopped, before the cache closes), Reload on every
// config reload.
//
// Words, as this package uses them:
//
//   - snapshot: the file at the path, or its decoded form (Snapshot): a
//     header, one record per cache entry, a SHA-256 trailer (format.go).
//   - entry: one key of a snapshot, cache.SnapshotEntry: a present
//     resource's current revision with its origin version and absolute
//     TTL expiry, or a collection (glob or Wildcard) the origin answered.
//   - fingerprint: a hash of the config that decides what a key means
//     (ConfigFingerprint); a snapshot of another fingerprint is foreign
//     and not loaded.
//   - load: reading, checking and restoring the snapshot at start; its
//     outcome is a LoadResult, the result label of
//     xds_relay_cache_snapshot_loads_total.
//   - write: collecting the cache's entries, encoding them and replacing
//     the file atomically; done by the Snapshotter's one writer.
//   - trusted: a regular file of the relay's own user that nobody else
//     may write (internal/trustfile); only such a file is read.
//
// A snapshot never stops the relay: one that cannot be read is logged,
// counted and ignored (the relay starts empty); one that cannot be
// written is logged, counted and retried at the next interval.
//
// See README.md for the files and the metrics.
package snapshot
