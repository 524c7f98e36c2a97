package config

import (
	"os"
	"path/filepath"
)

// snapshot validates the cache.snapshot_* keys: the directory of the path
// must exist (writes go to a temporary file beside it), the interval and
// the bound must be positive.
func (v *validator) snapshot() {
	c := v.c.Cache
	if c.SnapshotPath == "" {
		return
	}
	dir := filepath.Dir(c.SnapshotPath)
	if st, err := os.Stat(dir); err != nil {
		v.add("cache.snapshot_path", "directory %s: %v", dir, err)
	} else if !st.IsDir() {
		v.add("cache.snapshot_path", "%s is not a directory", dir)
	}
	if st, err := os.Stat(c.SnapshotPath); err == nil && st.IsDir() {
		v.add("cache.snapshot_path", "%s is a directory, want a file path", c.SnapshotPath)
	}
	v.positive("cache.snapshot_interval", c.SnapshotInterval)
	if c.SnapshotMaxBytes <= 0 {
		v.add("cache.snapshot_max_bytes", "must be positive, got %s", c.SnapshotMaxBytes)
	}
}
