package loadgen

import (
	"slices"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// typeState is what one client asks for and has of one resource type.
// The client's run goroutine is its only writer and reads it without a
// lock. names, answered, have and why, which others read (what clients
// lack), it writes under the client's mu; sent, accepted, nonce and refs
// only it reads.
type typeState struct {
	typeURL string
	// names are the names the client asks for, as it sends them: "*" is
	// the wildcard, a glob a collection. Replaced, never modified in place
	// (it may be shared with other clients).
	names []string
	// collection is set when the subscription is a wildcard (no names,
	// of LDS or CDS, or "*") or a glob: the client has it once a
	// response of the type answered it, whatever it had.
	collection bool
	// sent is set once a request of the type went out on this stream.
	sent bool
	// answered is set by the first response of the type that said
	// anything (a resource, a removal, an error; SotW: any response).
	answered bool
	// have maps each name it has to its version.
	have map[string]string
	// why maps a name the client asked for and does not have to what the
	// server said of it last: a removal or a resource error. nil until the
	// first.
	why map[string]string
	// accepted and nonce are the version and nonce of the last SotW
	// response, for the next request of the type.
	accepted, nonce string
	// refs, for an Envoy's LDS and CDS, maps each resource it has to the
	// names it makes the client ask for of the next type (a listener's
	// route configurations, an EDS cluster's service name); nil otherwise.
	refs map[string][]string
}

// newTypeState is the state of a subscription to names of typeURL;
// wildcard says no names means every resource.
func newTypeState(typeURL string, names []string, wildcard bool) *typeState {
	ts := &typeState{typeURL: typeURL, names: names, have: make(map[string]string)}
	ts.collection = (len(names) == 0 && wildcard) || slices.ContainsFunc(names, isCollection)
	return ts
}

// isCollection reports whether a subscribed name stands for many: the
// wildcard "*" or an xdstp glob (…/*, with or without parameters).
func isCollection(name string) bool {
	return name == "*" || strings.HasSuffix(strings.SplitN(name, "?", 2)[0], "/*")
}

// asking reports whether the client has anything to ask of the type: a
// name, a collection, or (SotW) an earlier request to follow up.
func (ts *typeState) asking() bool {
	return len(ts.names) > 0 || ts.collection || ts.sent
}

// asked reports whether name is one the client subscribed to by name.
func (ts *typeState) asked(name string) bool {
	return slices.Contains(ts.names, name)
}

// hasAll reports whether the client has everything it asked for of the
// type.
func (ts *typeState) hasAll() bool {
	if ts.collection && !ts.answered {
		return false
	}
	for _, n := range ts.names {
		if _, ok := ts.have[n]; !ok && !isCollection(n) {
			return false
		}
	}
	return true
}

// fullState reports whether a SotW response of the type carries every
// resource the client has, so one it leaves out is removed (LDS, CDS).
func (ts *typeState) fullState() bool {
	return ts.typeURL == resourcev3.ListenerType || ts.typeURL == resourcev3.ClusterType
}

// note records why name, asked for, is missing.
func (ts *typeState) note(name, why string) {
	if !ts.asked(name) {
		return
	}
	if ts.why == nil {
		ts.why = make(map[string]string)
	}
	ts.why[name] = why
}
