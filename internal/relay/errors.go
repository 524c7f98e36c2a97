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
