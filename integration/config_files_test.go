package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFileAtomic replaces path with data as an operator rotating a file
// does: write a temporary file beside it, then rename it over path.
func writeFileAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rotate-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}
