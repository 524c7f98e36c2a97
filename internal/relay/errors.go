package relay

import (
	"errors"
	"fmt"
)

var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("relay already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("relay closed")
)

// ErrReloadInvalid: a reload was refused because the new config does not
// validate or changes a field that needs a restart; nothing changed.
var ErrReloadInvalid = errors.New("config reload refused")

// ListenError: one of the relay's listeners could not be bound at Start
// ("admin 127.0.0.1:18001: address already in use"). Key is its config
// key: listen, admin, rest_listen or csds_listen.
type ListenError struct {
	Key, Addr string
	Err       error
}

func (e *ListenError) Error() string { return fmt.Sprintf("%s %s: %v", e.Key, e.Addr, e.Err) }

func (e *ListenError) Unwrap() error { return e.Err }
