package csds

import "errors"

var (
	// ErrBadRequest: a ClientStatusRequest the relay cannot evaluate (a
	// matcher without a pattern, a custom matcher, a bad regex, too many
	// matchers); answered with InvalidArgument.
	ErrBadRequest = errors.New("csds: bad request")
	// ErrClosed: the relay is shutting down; answered with Unavailable.
	ErrClosed = errors.New("csds: shutting down")
	// ErrStarted: Serve was called twice.
	ErrStarted = errors.New("csds: already started")
	// ErrTooManyStreams: a caller already holds the most client status
	// streams it may (csds_max_streams_per_caller); answered with
	// ResourceExhausted.
	ErrTooManyStreams = errors.New("csds: too many client status streams from one caller")
)
