package downstream

import (
	"errors"
	"fmt"
	"io"
)

// Sentinel errors. The handlers turn them into gRPC statuses, each with a
// deliberate code (session.go: checkType, statusFor, slowStatus; fetch.go:
// fetchRPC); rest.go maps those to HTTP codes.
var (
	// ErrMalformedName: an xdstp name that does not parse, or whose type
	// does not match the request's type.
	ErrMalformedName = errors.New("malformed resource name")
	// ErrUnknownAuthority: an xdstp name whose authority has no configuration.
	ErrUnknownAuthority = errors.New("authority has no configuration")
	// ErrTypeNotCarried: the name's authority is not configured to carry
	// its type (authorities[].types). It is an ErrUnknownAuthority: the
	// name is answered as not existing, and never asked of an origin.
	ErrTypeNotCarried = fmt.Errorf("%w for this type", ErrUnknownAuthority)
	// ErrNoRule: no aggregation rule matches a legacy name.
	ErrNoRule = errors.New("no aggregation rule matches")
	// ErrDuplicateName: one request lists the same resource name twice.
	ErrDuplicateName = errors.New("duplicate resource name in request")
	// ErrMissingType: an ADS request without type_url.
	ErrMissingType = errors.New("type_url is empty")
	// ErrWrongType: a request on a per-type stream for another type.
	ErrWrongType = errors.New("type_url is not the stream's type")
	// ErrDynamicParameters: a request names resources by ResourceLocator
	// (dynamic parameters, xRFC TP2), which the relay does not serve.
	ErrDynamicParameters = errors.New("resource locators (dynamic parameters) are not supported")
	// ErrAccessDenied: the client's identity matches no access rule of
	// the authority and type it asked for (PermissionDenied, HTTP 403).
	ErrAccessDenied = errors.New("permission denied by access rules")
	// ErrSlowClient: a Send did not complete within the send timeout.
	ErrSlowClient = errors.New("client did not drain its stream within the send timeout")
)

func isErr(err, target error) bool { return errors.Is(err, target) }

// isEOF reports whether Recv ended because the client closed its side.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// errStreamDone: the writer stopped because the stream is ending.
var errStreamDone = errors.New("stream ended")

// ErrNotModified: a REST poll's version_info is current and nothing changed
// within the poll's wait (HTTP 304).
var ErrNotModified = errors.New("resources not modified")
