package trustfile

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Trust says who, besides the relay's own user, may own and write a
// trusted file. Anyone else (another user owning it, anyone who may write
// it) is never trusted.
type Trust struct {
	// RootMayOwn: a file owned by root is trusted too (root may write
	// anything anyway).
	RootMayOwn bool
	// GroupMayWrite: the file's group may write it.
	GroupMayWrite bool
}

var (
	// RelayWritten is the trust of a file the relay wrote itself (the
	// snapshot): its own user's, writable by nobody else.
	RelayWritten = Trust{}
	// OperatorWritten is the trust of a file an operator, config management
	// or the kubelet writes (the config): the relay's user's or root's
	// (a ConfigMap volume's files are root's), writable by its owner and
	// group (a umask of 002, the default of Debian, Ubuntu and Fedora
	// users, makes every new file group-writable, for a group of one
	// user), never by anyone else.
	OperatorWritten = Trust{RootMayOwn: true, GroupMayWrite: true}
)

// Open opens path for reading without blocking (a FIFO or a device at the
// path cannot block the caller) and checks the opened file (fstat) as
// trust says (see trusted). A refused file is an error wrapping
// ErrUntrusted; a missing one wraps fs.ErrNotExist.
func Open(path string, trust Trust) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = trusted(fi, trust)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Read reads the trusted file at path whole, refusing one larger than
// maxBytes (maxBytes <= 0: no bound) with ErrTooLarge: by its size,
// unread, or at maxBytes+1 bytes read when it grows meanwhile.
func Read(path string, maxBytes int64, trust Trust) ([]byte, error) {
	var data []byte
	err := read(path, maxBytes, trust, func(r io.Reader) error {
		var err error
		data, err = io.ReadAll(r)
		return err
	})
	return data, err
}

// Digest is the SHA-256 of the trusted file at path, read as Read does but
// never held whole.
func Digest(path string, maxBytes int64, trust Trust) ([sha256.Size]byte, error) {
	h := sha256.New()
	err := read(path, maxBytes, trust, func(r io.Reader) error {
		_, err := io.Copy(h, r)
		return err
	})
	var sum [sha256.Size]byte
	if err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// read opens path (Open), refuses it when its size is over maxBytes, and
// hands use a reader of at most maxBytes+1 bytes of it; more than maxBytes
// read is ErrTooLarge.
func read(path string, maxBytes int64, trust Trust, use func(r io.Reader) error) error {
	f, fi, err := Open(path, trust)
	if err != nil {
		return err
	}
	defer f.Close()
	if maxBytes > 0 && fi.Size() > maxBytes {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, fi.Size(), maxBytes)
	}
	r := &countingReader{r: f}
	var lr io.Reader = r
	if maxBytes > 0 {
		lr = io.LimitReader(r, maxBytes+1)
	}
	if err := use(lr); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if maxBytes > 0 && r.n > maxBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// typeName says what a file that is not regular is, in words.
func typeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	default:
		return t.String()
	}
}
