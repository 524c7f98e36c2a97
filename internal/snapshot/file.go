package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/xds-relay/xds-relay/internal/trustfile"
)

// WriteFile replaces path with data atomically: a temporary file
// in the same directory is written, synced and renamed over path, and the
// directory is synced, so path has either the old snapshot or the new
// one, whole, even across a crash.
func WriteFile(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot %s: create temporary file: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("snapshot %s: write %s: %w", path, tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("snapshot %s: sync %s: %w", path, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("snapshot %s: close %s: %w", path, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("snapshot %s: rename: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		// The rename is durable once the directory is synced; a file
		// system that cannot sync a directory still has the file.
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// ReadFile reads path whole, refusing a file larger than maxBytes
// (maxBytes <= 0: no bound), and anything but a regular file of this
// process's user that no other user may write (ErrUntrusted): the checksum
// and the config fingerprint are not authentication, anyone who can write
// the file could make the relay serve what they wrote. Opening it never
// blocks (internal/trustfile). A missing file is an error wrapping
// fs.ErrNotExist.
func ReadFile(path string, maxBytes int64) ([]byte, error) {
	data, err := trustfile.Read(path, maxBytes, trustfile.RelayWritten)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return data, nil
}

// isNotExist is errors.Is(err, fs.ErrNotExist).
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
