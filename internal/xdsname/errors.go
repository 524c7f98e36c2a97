package xdsname

import "errors"

// ErrNotXDSTP is returned by Parse for a name that does not start with
// "xdstp://": a legacy (opaque) resource name.
var ErrNotXDSTP = errors.New("xdsname: not an xdstp:// name")

// Sentinels for malformed xdstp names. Parse wraps them with the name and
// the offending detail, e.g. `xdstp name "…": bad escape "%zz" in id`; test
// for them with errors.Is.
var (
	ErrBadEscape         = errors.New("bad escape")
	ErrControlChar       = errors.New("control character")
	ErrBadAuthority      = errors.New("bad authority")
	ErrNoType            = errors.New("no type")
	ErrNoID              = errors.New("no id")
	ErrEmptyID           = errors.New("empty id")
	ErrGlobNotLast       = errors.New("glob not in last path segment")
	ErrBadQuery          = errors.New("malformed query")
	ErrRepeatedParam     = errors.New("repeated context parameter")
	ErrBadDirective      = errors.New("malformed processing directive")
	ErrUnknownDirective  = errors.New("unknown processing directive")
	ErrRepeatedDirective = errors.New("repeated processing directive")
	ErrBadEntry          = errors.New("bad entry name")
	ErrBadAlt            = errors.New("bad alt URL")
	ErrNotURN            = errors.New("not a URN")
)
