//go:build unix

package cache

import (
	"fmt"
	"os"
	"syscall"
)

// openTrusted opens path for reading without blocking (a FIFO or a device
// at the path cannot hold the start up) and checks, on the opened file
// (fstat: what is checked is what is read), that it is a regular file
// owned by this process's user that neither its group nor anyone else may
// write. Anything else is refused with ErrSnapshotUntrusted: the checksum
// and the config fingerprint are not authentication, anyone who can write
// the file could make the relay serve what they wrote.
func openTrusted(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if err := trusted(fi); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// trusted checks an opened snapshot's type, owner and mode.
func trusted(fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file (%s)", ErrSnapshotUntrusted, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return fmt.Errorf("%w: owned by uid %d, not by this process's uid %d", ErrSnapshotUntrusted, st.Uid, uid)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o lets other users write it", ErrSnapshotUntrusted, perm)
	}
	return nil
}
