//go:build !unix

package cache

import (
	"fmt"
	"os"
)

// openTrusted opens path for reading and checks that it is a regular file
// (see the unix version for the owner and mode checks).
func openTrusted(path string) (*os.File, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%w: not a regular file (%s)", ErrSnapshotUntrusted, fi.Mode().Type())
	}
	return f, fi, nil
}
