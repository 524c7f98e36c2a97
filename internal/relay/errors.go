package relay

import "errors"

var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("relay already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("relay closed")
)
