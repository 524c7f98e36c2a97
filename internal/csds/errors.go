package csds

import "errors"

var (
	// ErrBadRequest: a ClientStatusRequest the relay cannot evaluate (a
	// matcher without a pattern, a custom matcher, a bad regex, too many
	// matchers); answered with InvalidArgument.
	ErrBadRequest = errors.New("csds: bad request")
	// ErrClosed: the relay is shutting down; answered with Unavailable.
	ErrClosed = errors.New("csds: shutting down")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("csds: already started")
)
