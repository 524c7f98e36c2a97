//go:build unix

package trustfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openNonblock: opening a FIFO or a device for reading returns at once.
const openNonblock = syscall.O_NONBLOCK

// trusted checks an opened file's type, owner and mode: a regular file
// owned by this process's user (or by root, when trust.RootMayOwn) that
// nobody else may write (but its group, when trust.GroupMayWrite).
func trusted(fi os.FileInfo, trust Trust) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file (%s)", ErrUntrusted, typeName(fi.Mode()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid := os.Geteuid()
		switch {
		case int(st.Uid) == uid:
		case trust.RootMayOwn && st.Uid == 0:
		case trust.RootMayOwn:
			return fmt.Errorf("%w: owned by uid %d, neither this process's uid %d nor root", ErrUntrusted, st.Uid, uid)
		default:
			return fmt.Errorf("%w: owned by uid %d, not by this process's uid %d", ErrUntrusted, st.Uid, uid)
		}
	}
	others := fs.FileMode(0o022)
	if trust.GroupMayWrite {
		others = 0o002
	}
	if perm := fi.Mode().Perm(); perm&others != 0 {
		return fmt.Errorf("%w: mode %04o lets other users write it", ErrUntrusted, perm)
	}
	return nil
}
