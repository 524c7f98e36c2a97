package relay

import "errors"

var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("relay already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("relay closed")
)

// ErrReloadInvalid: a reload was refused because the new config does not
// validate or changes a field that needs a restart; nothing changed.
var ErrReloadInvalid = errors.New("config reload refused")

// The propagation pages' refusals (400).
var (
	errNoNode   = errors.New("?node= (a node id) is required")
	errBadLimit = errors.New("?limit= must be a number, 0 or more")
)
