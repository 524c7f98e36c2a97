package snapshot

import (
	"errors"

	"github.com/xds-relay/xds-relay/internal/trustfile"
)

// Why a snapshot was not loaded (Decode, ReadFile).
var (
	// ErrCorrupt: not a snapshot, truncated, or its checksum or a
	// record does not check out.
	ErrCorrupt = errors.New("snapshot corrupt")
	// ErrVersion: written in a format version this relay does not read.
	ErrVersion = errors.New("snapshot format version not supported")
	// ErrForeign: written under another config (fingerprint).
	ErrForeign = errors.New("snapshot written under another config")
	// ErrTooLarge: the file exceeds cache.snapshot_max_bytes.
	ErrTooLarge = trustfile.ErrTooLarge
	// ErrUntrusted: not a regular file, not owned by the relay's
	// user, or writable by its group or by anyone.
	ErrUntrusted = trustfile.ErrUntrusted
)
