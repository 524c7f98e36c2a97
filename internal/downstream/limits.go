package downstream

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits bound what one client can make a Server hold: the config's
// downstream.limits (which holds the defaults). Every field is required.
// A stream that goes past one ends with a status naming the limit, and is
// counted in xds_relay_downstream_limit_rejections_total{limit}.
type Limits struct {
	// MaxStreams bounds client streams in total (ResourceExhausted).
	MaxStreams int
	// MaxNamesPerStream bounds the names subscribed on one stream, all
	// types together (ResourceExhausted).
	MaxNamesPerStream int
	// MaxNameLength bounds one name in a request, in bytes
	// (InvalidArgument).
	MaxNameLength int
	// MaxTypesPerStream bounds the type URLs one stream uses
	// (ResourceExhausted).
	MaxTypesPerStream int
}

func (l Limits) validate() error {
	if l.MaxStreams <= 0 || l.MaxNamesPerStream <= 0 || l.MaxNameLength <= 0 || l.MaxTypesPerStream <= 0 {
		return fmt.Errorf("downstream: every limit must be positive (the config's downstream.limits): %+v", l)
	}
	return nil
}

// The limit label values of xds_relay_downstream_limit_rejections_total.
const (
	limitStreams    = "streams"
	limitNames      = "names_per_stream"
	limitNameLength = "name_length"
	limitTypes      = "types_per_stream"
)

// overLimit counts a rejection and returns the status that ends the stream.
func (s *Server) overLimit(limit string, code codes.Code, format string, args ...any) error {
	s.m.limitRejections.WithLabelValues(limit).Inc()
	return status.Errorf(code, format, args...)
}

// admitStream takes a place among the MaxStreams client streams; release
// gives it back. ok is false when every place is taken.
func (s *Server) admitStream() (release func(), err error) {
	for {
		n := s.openStreams.Load()
		if n >= int64(s.limits().MaxStreams) {
			return nil, s.overLimit(limitStreams, codes.ResourceExhausted,
				"the relay serves %d client streams, its limit (downstream.limits.max_streams); try another relay or later", n)
		}
		if s.openStreams.CompareAndSwap(n, n+1) {
			return func() { s.openStreams.Add(-1) }, nil
		}
	}
}

// checkNames refuses a request's list of names: more names than a stream
// may subscribe (ResourceExhausted), a name longer than MaxNameLength or
// one resource twice (InvalidArgument).
func (s *Server) checkNames(field, typeURL string, names []string) error {
	if len(names) > s.limits().MaxNamesPerStream {
		return s.overLimit(limitNames, codes.ResourceExhausted,
			"%s holds %d names, over the limit of %d (downstream.limits.max_names_per_stream)",
			field, len(names), s.limits().MaxNamesPerStream)
	}
	for _, n := range names {
		if len(n) > s.limits().MaxNameLength {
			return s.overLimit(limitNameLength, codes.InvalidArgument,
				"%s holds a name of %d bytes (%s), over the limit of %d (downstream.limits.max_name_length)",
				field, len(n), quoteShort(n), s.limits().MaxNameLength)
		}
	}
	return checkDuplicates(field, typeURL, names)
}

// checkTypeLimit refuses a type URL that would take the stream past
// MaxTypesPerStream.
func (ss *session) checkTypeLimit(typeURL string) error {
	ss.mu.Lock()
	_, known := ss.types[typeURL]
	n := len(ss.types)
	ss.mu.Unlock()
	if known || n < ss.srv.limits().MaxTypesPerStream {
		return nil
	}
	return ss.srv.overLimit(limitTypes, codes.ResourceExhausted,
		"this stream already uses %d type URLs, the limit (downstream.limits.max_types_per_stream); %s refused", n, quoteShort(typeURL))
}

// checkNamesLocked refuses a request that would leave the stream
// subscribed to more than MaxNamesPerStream names: on ts it drops the
// names drop (those subscribed; all of them when replace, as a SotW list
// does) and adds the names add (those not yet). A request that adds none
// (an ACK) cannot go over and costs nothing.
func (ss *session) checkNamesLocked(ts *typeState, replace bool, drop, add []string) error {
	if len(add) == 0 {
		return nil
	}
	total := 0
	for _, t := range ss.types {
		total += len(t.subs)
	}
	if replace {
		total -= len(ts.subs)
		total += len(add) // a list without duplicates (checkNames)
	} else {
		for _, n := range drop {
			if _, ok := ts.subs[n]; ok {
				total--
			}
		}
		for _, n := range add {
			if _, ok := ts.subs[n]; !ok {
				total++
			}
		}
	}
	if total <= ss.srv.limits().MaxNamesPerStream {
		return nil
	}
	return ss.srv.overLimit(limitNames, codes.ResourceExhausted,
		"the request would subscribe this stream to %d names, over the limit of %d (downstream.limits.max_names_per_stream)",
		total, ss.srv.limits().MaxNamesPerStream)
}

// checkInitialVersions bounds a delta request's initial_resource_versions
// like a subscription: as many names as a stream may subscribe, each no
// longer than a name may be.
func (ss *session) checkInitialVersions(versions map[string]string) error {
	if n := len(versions); n > ss.srv.limits().MaxNamesPerStream {
		return ss.srv.overLimit(limitNames, codes.ResourceExhausted,
			"initial_resource_versions holds %d names, over the limit of %d (downstream.limits.max_names_per_stream)",
			n, ss.srv.limits().MaxNamesPerStream)
	}
	for n := range versions {
		if len(n) > ss.srv.limits().MaxNameLength {
			return ss.srv.overLimit(limitNameLength, codes.InvalidArgument,
				"initial_resource_versions holds a name of %d bytes (%s), over the limit of %d (downstream.limits.max_name_length)",
				len(n), quoteShort(n), ss.srv.limits().MaxNameLength)
		}
	}
	return nil
}

// maxClientText bounds a client-controlled string the relay logs or shows
// (node id and cluster, NACK error details, nonces, names in warnings), so
// that one request cannot make the relay log more than a few KiB.
const maxClientText = 256

// clientText returns s cut to maxClientText bytes, saying how long it was.
func clientText(s string) string {
	if len(s) <= maxClientText {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:maxClientText], len(s))
}
