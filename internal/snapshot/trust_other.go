//go:build !unix

package snapshot

import (
	"fmt"
	"os"
)

// openNonblock: no such flag here.
const openNonblock = 0

// trusted checks that an opened snapshot is a regular file (owner and
// mode are checked on unix only).
func trusted(fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file (%s)", ErrUntrusted, fi.Mode().Type())
	}
	return nil
}
