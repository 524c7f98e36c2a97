//go:build !unix

package trustfile

import (
	"fmt"
	"os"
)

// openNonblock: no such flag here.
const openNonblock = 0

// trusted checks that an opened file is a regular file (owner and mode
// are checked on unix only).
func trusted(fi os.FileInfo, _ Trust) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file (%s)", ErrUntrusted, typeName(fi.Mode()))
	}
	return nil
}
