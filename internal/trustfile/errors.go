package trustfile

import "errors"

// Why a file was refused (Open, Read, Digest).
var (
	// ErrUntrusted: not a regular file, not owned by a user the Owner
	// allows, or writable by its group or by anyone.
	ErrUntrusted = errors.New("file not trusted")
	// ErrTooLarge: the file exceeds the caller's bound.
	ErrTooLarge = errors.New("file larger than its bound")
)

// Refused says whether err is a refusal of the file itself (ErrUntrusted,
// ErrTooLarge), as opposed to a file that could not be opened or read.
func Refused(err error) bool {
	return errors.Is(err, ErrUntrusted) || errors.Is(err, ErrTooLarge)
}
