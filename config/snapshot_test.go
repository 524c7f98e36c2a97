package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestValidateSnapshot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "relay.snap")
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "off by default"},
		{name: "path in a directory that exists", extra: "cache:\n  snapshot_path: " + good + "\n"},
		{name: "interval and bound ignored while off", extra: "cache:\n  snapshot_interval: 0s\n"},
		{name: "directory missing", extra: "cache:\n  snapshot_path: " + filepath.Join(dir, "missing", "s") + "\n",
			want: []problem{{"cache.snapshot_path", 5, "no such file or directory"}}},
		{name: "parent is a file", extra: "cache:\n  snapshot_path: " + filepath.Join(file, "s") + "\n",
			want: []problem{{"cache.snapshot_path", 5, "not a directory"}}},
		{name: "path is a directory", extra: "cache:\n  snapshot_path: " + dir + "\n",
			want: []problem{{"cache.snapshot_path", 5, "is a directory, want a file path"}}},
		{name: "interval zero", extra: "cache:\n  snapshot_path: " + good + "\n  snapshot_interval: 0s\n",
			want: []problem{{"cache.snapshot_interval", 6, "must be a positive duration"}}},
		{name: "bound zero", extra: "cache:\n  snapshot_path: " + good + "\n  snapshot_max_bytes: 0\n",
			want: []problem{{"cache.snapshot_max_bytes", 6, "must be positive"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimalAuthorities+tt.extra), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
	if c := Default(); c.Cache.SnapshotPath != "" || c.Cache.SnapshotInterval != DefaultSnapshotInterval || c.Cache.SnapshotMaxBytes != DefaultSnapshotMaxBytes {
		t.Errorf("Default().Cache = %+v", c.Cache)
	}
}
