package upstream

import "errors"

var (
	// ErrNoOrigins: an authority has no origin to connect to.
	ErrNoOrigins = errors.New("authority has no origins")
	// ErrNoCache: Options.Cache is required.
	ErrNoCache = errors.New("upstream: Options.Cache is required")
	// ErrBadOptions: an Options number is missing or out of range.
	ErrBadOptions = errors.New("upstream: invalid Options")
	// ErrNoResponse: an origin accepted the stream but did not answer
	// within Options.ResponseTimeout (the attempt fails over).
	ErrNoResponse = errors.New("origin did not answer")
	// ErrNoPerTypeService: a per-type transport was asked for a type that
	// has no per-type service (the link refuses the type: refused.go).
	ErrNoPerTypeService = errors.New("no per-type discovery service for type")
	// errRejected wraps why an origin response was NACKed.
	errRejected = errors.New("response rejected")
	// errOtherAuthority: the response names another authority's resource
	// (authority.go); wrapped with errRejected.
	errOtherAuthority = errors.New("names another authority")
)
