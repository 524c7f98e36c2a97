package aggregation

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// The YAML schema of aggregation.rules. Rules are tried in order and the
// first one that matches a request wins. A request is (type URL, resource
// name, client Node); a wildcard subscription has the resource name "".
// Every rule's result names an authority and builds a group key, or refuses
// the request; clients whose requests resolve to the same (authority,
// group) share one upstream stream, so a group must only contain clients
// the origin answers alike.
// Two rules that build the same key for the same authority share a stream on
// purpose (e.g. one rule for EDS and one for CDS, both grouping by cluster).
//
// Every type here is decoded strictly: unknown keys are errors.

// Rule is one aggregation rule as written in YAML under aggregation.rules.
type Rule struct {
	// Name identifies the rule in logs, in `xds-relay explain` and in
	// /debug/clients. Required, unique among the rules.
	Name string `yaml:"name,omitempty"`
	// Default marks the rule that serves every request no earlier rule
	// matched. A default rule has no match conditions and must be the last
	// rule. Without a default rule a request that matches no rule is refused.
	// Default: false.
	Default bool `yaml:"default,omitempty"`
	// Match lists the conditions a request must meet; all present conditions
	// must be met. A rule that is not the default needs at least one condition.
	Match Match `yaml:"match,omitempty"`
	// Result says where matching requests are served from. Required.
	Result Target `yaml:"result,omitempty"`
}

// Match is the set of conditions of a rule. Absent conditions are met by
// every request.
type Match struct {
	// TypeURLs restricts the rule to these resource types, written as full
	// type URLs (type.googleapis.com/envoy.config.cluster.v3.Cluster).
	// Default: empty, any type.
	TypeURLs []string `yaml:"type_urls,omitempty"`
	// ResourceName tests the requested resource name. A wildcard
	// subscription (LDS/CDS with no names, or "*") has the name "".
	// Default: absent, any name.
	ResourceName *StringMatcher `yaml:"resource_name,omitempty"`
	// Node tests the Node the client sent on its stream. Default: absent,
	// any node.
	Node *NodeMatch `yaml:"node,omitempty"`
}

// NodeMatch tests fields of the client's Node. A node field the client did
// not set is the empty string, except metadata: a metadata path the client
// did not send matches nothing.
type NodeMatch struct {
	// ID tests node.id. Default: absent, any id.
	ID *StringMatcher `yaml:"id,omitempty"`
	// Cluster tests node.cluster. Default: absent, any cluster.
	Cluster *StringMatcher `yaml:"cluster,omitempty"`
	// Locality tests node.locality. Default: absent, any locality.
	Locality *LocalityMatch `yaml:"locality,omitempty"`
	// Metadata tests values in node.metadata; all entries must be met.
	// Default: empty, any metadata.
	Metadata []MetadataMatch `yaml:"metadata,omitempty"`
	// HasMetadata, when set, tests whether the client sent node.metadata
	// at all (true: it did, even an empty one; false: it did not).
	// Default: absent, either.
	HasMetadata *bool `yaml:"has_metadata,omitempty"`
}

// LocalityMatch tests node.locality.
type LocalityMatch struct {
	// Region tests locality.region. Default: absent, any region.
	Region *StringMatcher `yaml:"region,omitempty"`
	// Zone tests locality.zone. Default: absent, any zone.
	Zone *StringMatcher `yaml:"zone,omitempty"`
	// SubZone tests locality.sub_zone. Default: absent, any sub-zone.
	SubZone *StringMatcher `yaml:"sub_zone,omitempty"`
}

// MetadataMatch tests one value in node.metadata: exactly one of Path and
// Keys names it, and exactly one of Value, String, Bool and Present tests
// it.
type MetadataMatch struct {
	// Path is a dot-separated list of keys into the metadata Struct:
	// "team.name" is metadata.fields["team"].struct_value.fields["name"].
	// Keys cannot contain dots (use Keys for those).
	Path string `yaml:"path,omitempty"`
	// Keys is the path as a list of keys, for keys that contain dots:
	// [envoy.io, track] is metadata.fields["envoy.io"]...fields["track"].
	Keys []string `yaml:"keys,omitempty"`
	// Value tests the value found at the path whatever its type. A string
	// is tested as is, a number in its shortest decimal form ("3", "0.5"),
	// a bool as "true" or "false". A path that is absent, or that ends at
	// null, a list or a struct, does not match.
	Value *StringMatcher `yaml:"value,omitempty"`
	// String tests the value only if it is a string: the bool true does
	// not match {exact: "true"}.
	String *StringMatcher `yaml:"string,omitempty"`
	// Bool matches a bool value equal to it; a string "true" is not a bool.
	Bool *bool `yaml:"bool,omitempty"`
	// Present, true, matches a path that has any value (null, a list or
	// a struct included); false matches a path that is absent.
	Present *bool `yaml:"present,omitempty"`
}

// StringMatcher tests a string. Exactly one of its fields must be set.
type StringMatcher struct {
	// Not matches the strings its matcher does not match (a negative
	// matcher: not: {exact: canary}).
	Not *StringMatcher `yaml:"not,omitempty"`
	// AllOf matches the strings every one of its matchers matches: several
	// matchers on one field (all_of: [{prefix: a}, {not: {exact: ab}}]).
	AllOf []StringMatcher `yaml:"all_of,omitempty"`
	// Exact matches the string equal to it. `exact: ""` (quoted) matches the
	// empty string, e.g. the name of a wildcard subscription.
	Exact *string `yaml:"exact,omitempty"`
	// Prefix matches strings that start with it. Must not be empty.
	Prefix *string `yaml:"prefix,omitempty"`
	// Regex is an RE2 expression (https://github.com/google/re2/wiki/Syntax)
	// that must match the whole string, as in Envoy's safe_regex: "front.*"
	// matches "frontend" but not "my-frontend". Its capture groups, numbered
	// or named, can be used in the result's group key.
	Regex *string `yaml:"regex,omitempty"`
}

// Target is the result of a rule: where matching requests are served from,
// or that they are refused.
type Target struct {
	// Refuse, when set, refuses every request the rule matches: the client's
	// stream ends with FAILED_PRECONDITION and a message naming the rule and
	// the reason. A refusing rule has no authority, group or node.
	Refuse *Refuse `yaml:"refuse,omitempty"`
	// Authority names the configured authority whose origins serve the
	// group. Required unless Refuse; must be one of the config's authorities.
	Authority string `yaml:"authority,omitempty"`
	// Group is the list of parts concatenated into the group key. It needs
	// at least one literal part, so a key is never empty (the empty group is
	// the authority's stream for xdstp names): a single literal puts every
	// client the rule matches in one group. Two value parts (node_field,
	// capture) must be separated by a literal, so that ("ab","c") and
	// ("a","bc") cannot build the same key.
	Group []GroupPart `yaml:"group,omitempty"`
	// Node, when set, is the Node the relay presents upstream on the
	// group's stream. Default: absent: a Node built from the group key
	// alone, the same whichever client of the group comes first: each node
	// field the key takes a value from has that value (the whole field
	// for node_field, only the captured or rewritten text for a capture or
	// a rewrite, metadata as a string at its path), with the relay's node
	// id unless the key uses
	// node.id; never anything else a client sent (upstreamnode.go).
	Node *UpstreamNode `yaml:"node,omitempty"`
}

// Refuse is the result of a rule that refuses the requests it matches.
type Refuse struct {
	// Reason is told to the refused client and shown by explain. Required.
	Reason string `yaml:"reason,omitempty"`
}

// GroupPart is one part of a group key. Exactly one of Literal, NodeField,
// Capture, Rewrite and Metadata must be set.
type GroupPart struct {
	// Literal is copied into the key as is. Must not be empty.
	Literal *string `yaml:"literal,omitempty"`
	// NodeField copies a field of the client's Node: id, cluster,
	// locality.region, locality.zone, locality.sub_zone or metadata.<path>
	// (a path as in MetadataMatch; absent metadata is the empty string).
	NodeField *string `yaml:"node_field,omitempty"`
	// Capture copies a capture group of one of the rule's regex conditions.
	Capture *Capture `yaml:"capture,omitempty"`
	// Rewrite copies a request value through a regex find-and-replace.
	Rewrite *Rewrite `yaml:"rewrite,omitempty"`
	// Metadata copies a typed node.metadata value.
	Metadata *MetadataPart `yaml:"metadata,omitempty"`
	// RefuseEmpty refuses the request when this value part is empty (an
	// absent field, or a rewrite that leaves nothing), instead of adding
	// nothing to the key. Not for literals. Default: false.
	RefuseEmpty bool `yaml:"refuse_empty,omitempty"`
}

// Rewrite is a key part computed from a request value by a regex
// find-and-replace, as Go's Regexp.ReplaceAllString: the regex is NOT
// anchored, every non-overlapping match is replaced by Replace, in which $1,
// ${1} and ${name} stand for capture groups ("$1x" is the group named "1x":
// write "${1}x") and $$ is a "$". A value the regex does not match is copied
// unchanged.
type Rewrite struct {
	// From names the value: resource_name, node.id, node.cluster,
	// node.locality.region, node.locality.zone, node.locality.sub_zone,
	// node.metadata.<path> (any scalar, formatted as in MetadataMatch.Value)
	// or node.metadata with Keys and Type. Required.
	From string `yaml:"from,omitempty"`
	// Keys is the metadata path as a list, with From: node.metadata.
	Keys []string `yaml:"keys,omitempty"`
	// Type is the metadata value's type, with From: node.metadata: string,
	// bool or number; a value of another type is rewritten as "".
	Type string `yaml:"type,omitempty"`
	// Regex is an RE2 expression. Required.
	Regex string `yaml:"regex,omitempty"`
	// Replace is the replacement template; it may be empty. Every group it
	// names must exist in Regex.
	Replace string `yaml:"replace,omitempty"`
}

// MetadataPart copies the node.metadata value at Keys if it has Type: a
// string as is, a bool as "true"/"false", a number in its shortest decimal
// form; an absent value, or one of another type, is "". So the bool true
// and the string "true" are different groups under type: bool or string.
type MetadataPart struct {
	// Keys is the path, a list of keys (which may contain dots). Required.
	Keys []string `yaml:"keys,omitempty"`
	// Type is string, bool or number. Required.
	Type string `yaml:"type,omitempty"`
}

// Capture names a capture group of a regex in the same rule's match.
type Capture struct {
	// From names the condition whose regex is captured: resource_name,
	// node.id, node.cluster, node.locality.region, node.locality.zone,
	// node.locality.sub_zone or node.metadata.<path> (the first metadata
	// condition with that path). That condition must use regex. Required.
	From string `yaml:"from,omitempty"`
	// Group is the capture group: its number (1 is the first group, 0 the
	// whole value) or its name ((?P<name>...)). Required. A group that did
	// not take part in the match contributes the empty string.
	Group string `yaml:"group,omitempty"`
}

// UpstreamNode is the Node the relay presents upstream for a group. At least
// one field must be set.
type UpstreamNode struct {
	// ID is the node.id sent upstream. Default: empty.
	ID string `yaml:"id,omitempty"`
	// Cluster is the node.cluster sent upstream. Default: empty.
	Cluster string `yaml:"cluster,omitempty"`
	// Metadata is the node.metadata sent upstream, fixed: YAML scalars,
	// lists and maps become the Struct's values with their types (true is
	// a bool, "true" a string). Default: none.
	Metadata map[string]any `yaml:"metadata,omitempty"`
}

// Request is what a client asked for, as matching sees it. Callers pass
// legacy (non-xdstp) names only: an xdstp name is its own key.
type Request struct {
	TypeURL string
	Name    string // resource name; "" for a wildcard subscription
	Node    *corev3.Node
}

// Result says where a request is served from.
type Result struct {
	Rule      string // the matching rule's name
	Authority string // whose origins serve the group
	// Group is the group key, never empty; clients with equal (Authority,
	// Group) share one upstream stream.
	Group string
	// Node is the Node to present for the upstream stream: the rule's
	// (shared by every match: read only), or one built from the group key
	// alone (see Target.Node). Never nil.
	Node *corev3.Node
}
