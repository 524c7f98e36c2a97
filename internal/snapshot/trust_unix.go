//go:build unix

package snapshot

import (
	"fmt"
	"os"
	"syscall"
)

// openNonblock: opening a FIFO or a device for reading returns at once.
const openNonblock = syscall.O_NONBLOCK

// trusted checks an opened snapshot's type, owner and mode: a regular
// file owned by this process's user that neither its group nor anyone
// else may write.
func trusted(fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file (%s)", ErrUntrusted, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return fmt.Errorf("%w: owned by uid %d, not by this process's uid %d", ErrUntrusted, st.Uid, uid)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o lets other users write it", ErrUntrusted, perm)
	}
	return nil
}
