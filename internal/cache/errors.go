package cache

import "errors"

// Why a snapshot was not loaded (DecodeSnapshot, ReadSnapshotFile).
var (
	// ErrSnapshotCorrupt: not a snapshot, truncated, or its checksum or a
	// record does not check out.
	ErrSnapshotCorrupt = errors.New("snapshot corrupt")
	// ErrSnapshotVersion: written in a format version this relay does not read.
	ErrSnapshotVersion = errors.New("snapshot format version not supported")
	// ErrSnapshotForeign: written under another config (fingerprint).
	ErrSnapshotForeign = errors.New("snapshot written under another config")
	// ErrSnapshotTooLarge: the file exceeds cache.snapshot_max_bytes.
	ErrSnapshotTooLarge = errors.New("snapshot larger than its bound")
	// ErrSnapshotUntrusted: not a regular file, not owned by the relay's
	// user, or writable by its group or by anyone.
	ErrSnapshotUntrusted = errors.New("snapshot not trusted")
)
