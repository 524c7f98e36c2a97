package downstream

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits bound what one client can make a Server have: the config's
// downstream.limits (which has the defaults). Every field is required.
// A stream that goes past one ends with a status naming the limit, and is
// counted in xds_relay_downstream_limit_rejections_total{limit}.
type Limits struct {
	// MaxStreams bounds client streams in total (ResourceExhausted).
	MaxStreams int
	// MaxNamesPerStream bounds the names one stream makes the Server keep,
	// all types together (ResourceExhausted): see below.
	MaxNamesPerStream int
	// MaxNameLength bounds one name in a request, in bytes
	// (InvalidArgument).
	MaxNameLength int
	// MaxTypesPerStream bounds the type URLs one stream uses
	// (ResourceExhausted).
	MaxTypesPerStream int
	// MaxVersionLength bounds one version string a client sends, in
	// bytes: a SotW version_info, a value of initial_resource_versions, a
	// response_nonce (InvalidArgument).
	MaxVersionLength int
	// MaxGroupsPerAuthority bounds the upstream links (aggregation groups)
	// one authority may have open (ResourceExhausted); MaxNewGroupsPerStream
	// the links one stream may cause to open (ResourceExhausted): see
	// groups.go.
	MaxGroupsPerAuthority int
	MaxNewGroupsPerStream int
	// RequestsPerSecond and RequestBurst are each stream's request budget
	// (budget.go): RequestBurst requests at once, then RequestsPerSecond;
	// past it the stream's next request is read later. 0: no budget (the
	// config always sets one).
	RequestsPerSecond int
	RequestBurst      int
}

// What a stream keeps, and which limit bounds it (the names limit counts
// every name a stream makes the relay keep, not only the served ones):
//   - names subscribed, of any authority and state: served, of an
//     authority with no configuration, of a type it does not carry, or
//     denied (delta answers those as removed, and remembers that it did):
//     MaxNamesPerStream, each at most MaxNameLength;
//   - names declared in initial_resource_versions that are not subscribed
//     (a wildcard or glob may still have them): MaxNamesPerStream, with
//     the above; each version at most MaxVersionLength;
//   - a SotW ACK's version_info per type: MaxVersionLength; nonces are
//     compared, never kept, and bounded alike;
//   - type URLs: MaxTypesPerStream, each at most MaxNameLength;
//   - the Node: only what the relay reads (node.go), each string at most
//     MaxNameLength;
//   - the last NACK's message per type and the log context: maxClientText
//     each; aggregation group keys shown: maxGroupsKept;
//   - upstream links it caused to open (each an origin stream, kept until
//     idle): MaxNewGroupsPerStream, and every stream's together
//     MaxGroupsPerAuthority (groups.go).
//
// Members of wildcard and glob collections are kept too: the origin
// decides those, not the client.

// maxGroupsKept bounds the aggregation group keys a session remembers for
// its log lines and /debug/clients (a rule that captures the resource name
// makes one per name).
const maxGroupsKept = 16

func (l Limits) validate() error {
	if l.MaxStreams <= 0 || l.MaxNamesPerStream <= 0 || l.MaxNameLength <= 0 || l.MaxTypesPerStream <= 0 || l.MaxVersionLength <= 0 ||
		l.MaxGroupsPerAuthority <= 0 || l.MaxNewGroupsPerStream <= 0 {
		return fmt.Errorf("downstream: every limit must be positive (the config's downstream.limits): %+v", l)
	}
	if l.RequestsPerSecond < 0 || l.RequestBurst < 0 || (l.RequestsPerSecond > 0) != (l.RequestBurst > 0) {
		return fmt.Errorf("downstream: a request budget needs a positive rate and burst, or neither: %+v", l)
	}
	return nil
}

// The limit label values of xds_relay_downstream_limit_rejections_total.
const (
	limitStreams    = "streams"
	limitNames      = "names_per_stream"
	limitNameLength = "name_length"
	limitTypes      = "types_per_stream"
	limitVersion    = "version_length"

	limitGroupsPerAuthority = "groups_per_authority"
	limitNewGroupsPerStream = "new_groups_per_stream"
)

// overLimit counts a rejection and returns the status that ends the stream.
func (s *Server) overLimit(limit string, code codes.Code, format string, args ...any) error {
	s.m.limitRejections.WithLabelValues(limit).Inc()
	return status.Errorf(code, format, args...)
}

// admitStream takes a place among the MaxStreams client streams; leave
// gives it back. ok is false when every place is taken.
func (s *Server) admitStream() (leave func(), err error) {
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
			"%s has %d names, over the limit of %d (downstream.limits.max_names_per_stream)",
			field, len(names), s.limits().MaxNamesPerStream)
	}
	for _, n := range names {
		if len(n) > s.limits().MaxNameLength {
			return s.overLimit(limitNameLength, codes.InvalidArgument,
				"%s has a name of %d bytes (%s), over the limit of %d (downstream.limits.max_name_length)",
				field, len(n), quoteShort(n), s.limits().MaxNameLength)
		}
	}
	return checkDuplicates(field, typeURL, names)
}

// checkTypeLimit refuses a type URL that would take the stream past
// MaxTypesPerStream.
func (ss *session) checkTypeLimit(typeURL string) error {
	ss.mu.Lock()
	known := ss.types.has(typeURL)
	n := ss.types.len()
	ss.mu.Unlock()
	if known || n < ss.srv.limits().MaxTypesPerStream {
		return nil
	}
	return ss.srv.overLimit(limitTypes, codes.ResourceExhausted,
		"this stream already uses %d type URLs, the limit (downstream.limits.max_types_per_stream); %s refused", n, quoteShort(typeURL))
}

// checkNamesLocked refuses a request that would leave the stream keeping
// more than MaxNamesPerStream names (keptLocked, every type): on ts it
// drops the names drop (all of them when replace, as a SotW list does),
// adds the names add and, on a type's first request, the names declared
// (initial_resource_versions) that are not added too. A request that adds
// none (an ACK) cannot go over and costs nothing.
func (ss *session) checkNamesLocked(ts *typeState, replace bool, drop, add []string, declared map[string]string) error {
	if len(add) == 0 && len(declared) == 0 {
		return nil
	}
	total := 0
	for _, t := range ss.types.all() {
		total += t.keptLocked()
	}
	if replace {
		total -= ts.keptLocked()
		total += len(add) // a list without duplicates (checkNames)
	} else {
		for _, n := range drop {
			if ts.keepsLocked(n) {
				total--
			}
		}
		for _, n := range add {
			if !ts.keepsLocked(n) {
				total++
			}
		}
		var adding map[string]struct{}
		if len(declared) > 0 && len(add) > 0 {
			adding = make(map[string]struct{}, len(add))
			for _, n := range add {
				adding[n] = struct{}{}
			}
		}
		for n := range declared {
			if _, ok := adding[n]; !ok && !ts.keepsLocked(n) {
				total++
			}
		}
	}
	if total <= ss.srv.limits().MaxNamesPerStream {
		return nil
	}
	return ss.srv.overLimit(limitNames, codes.ResourceExhausted,
		"the request would make this stream keep %d names (subscribed, unknown, denied or declared in initial_resource_versions), over the limit of %d (downstream.limits.max_names_per_stream)",
		total, ss.srv.limits().MaxNamesPerStream)
}

// checkInitialVersions bounds a delta request's initial_resource_versions
// like a subscription: as many names as a stream may keep, each no longer
// than a name may be, each version no longer than MaxVersionLength.
func (ss *session) checkInitialVersions(versions map[string]string) error {
	if n := len(versions); n > ss.srv.limits().MaxNamesPerStream {
		return ss.srv.overLimit(limitNames, codes.ResourceExhausted,
			"initial_resource_versions has %d names, over the limit of %d (downstream.limits.max_names_per_stream)",
			n, ss.srv.limits().MaxNamesPerStream)
	}
	for n, v := range versions {
		if len(n) > ss.srv.limits().MaxNameLength {
			return ss.srv.overLimit(limitNameLength, codes.InvalidArgument,
				"initial_resource_versions has a name of %d bytes (%s), over the limit of %d (downstream.limits.max_name_length)",
				len(n), quoteShort(n), ss.srv.limits().MaxNameLength)
		}
		if err := ss.srv.checkVersion("initial_resource_versions["+quoteShort(n)+"]", v); err != nil {
			return err
		}
	}
	return nil
}

// checkVersion refuses a version string (version_info, a declared version,
// a response_nonce) longer than MaxVersionLength.
func (s *Server) checkVersion(field, v string) error {
	if max := s.limits().MaxVersionLength; len(v) > max {
		return s.overLimit(limitVersion, codes.InvalidArgument,
			"%s of %d bytes (%s), over the limit of %d (downstream.limits.max_version_length)",
			field, len(v), quoteShort(v), max)
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
