package aggregation

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// The YAML schema of aggregation.rules. Rules are tried in order and the
// first one that matches a request wins. A request is (type URL, resource
// name, client Node); a wildcard subscription has the resource name "".
// Every rule's result names an authority and builds a group key; clients
// whose requests resolve to the same (authority, group) share one upstream
// stream, so a group must only contain clients the origin answers alike.
// Two rules that build the same key for the same authority share a stream on
// purpose (e.g. one rule for EDS and one for CDS, both grouping by cluster).
//
// Every type here is decoded strictly: unknown keys are errors.

// Rule is one aggregation rule as written in YAML under aggregation.rules.
type Rule struct {
	// Name identifies the rule in logs, in `xds-relay explain` and in
	// /debug/clients. Required, unique among the rules.
	Name string `yaml:"name"`
	// Default marks the rule that serves every request no earlier rule
	// matched. A default rule has no match conditions and must be the last
	// rule. Without a default rule a request that matches no rule is refused.
	// Default: false.
	Default bool `yaml:"default"`
	// Match lists the conditions a request must meet; all present conditions
	// must hold. A rule that is not the default needs at least one condition.
	Match Match `yaml:"match"`
	// Result says where matching requests are served from. Required.
	Result Target `yaml:"result"`
}

// Match is the set of conditions of a rule. Absent conditions hold for
// every request.
type Match struct {
	// TypeURLs restricts the rule to these resource types, written as full
	// type URLs (type.googleapis.com/envoy.config.cluster.v3.Cluster).
	// Default: empty, any type.
	TypeURLs []string `yaml:"type_urls"`
	// ResourceName tests the requested resource name. A wildcard
	// subscription (LDS/CDS with no names, or "*") has the name "".
	// Default: absent, any name.
	ResourceName *StringMatcher `yaml:"resource_name"`
	// Node tests the Node the client sent on its stream. Default: absent,
	// any node.
	Node *NodeMatch `yaml:"node"`
}

// NodeMatch tests fields of the client's Node. A node field the client did
// not set is the empty string, except metadata: a metadata path the client
// did not send matches nothing.
type NodeMatch struct {
	// ID tests node.id. Default: absent, any id.
	ID *StringMatcher `yaml:"id"`
	// Cluster tests node.cluster. Default: absent, any cluster.
	Cluster *StringMatcher `yaml:"cluster"`
	// Locality tests node.locality. Default: absent, any locality.
	Locality *LocalityMatch `yaml:"locality"`
	// Metadata tests values in node.metadata; all entries must hold.
	// Default: empty, any metadata.
	Metadata []MetadataMatch `yaml:"metadata"`
}

// LocalityMatch tests node.locality.
type LocalityMatch struct {
	// Region tests locality.region. Default: absent, any region.
	Region *StringMatcher `yaml:"region"`
	// Zone tests locality.zone. Default: absent, any zone.
	Zone *StringMatcher `yaml:"zone"`
	// SubZone tests locality.sub_zone. Default: absent, any sub-zone.
	SubZone *StringMatcher `yaml:"sub_zone"`
}

// MetadataMatch tests one value in node.metadata.
type MetadataMatch struct {
	// Path is a dot-separated list of keys into the metadata Struct:
	// "team.name" is metadata.fields["team"].struct_value.fields["name"].
	// Keys cannot contain dots. Required.
	Path string `yaml:"path"`
	// Value tests the value found at Path. A string is tested as is, a
	// number in its shortest decimal form ("3", "0.5"), a bool as "true" or
	// "false". A path that is absent, or that ends at null, a list or a
	// struct, does not match. Required.
	Value StringMatcher `yaml:"value"`
}

// StringMatcher tests a string. Exactly one of its fields must be set.
type StringMatcher struct {
	// Exact matches the string equal to it. `exact: ""` (quoted) matches the
	// empty string, e.g. the name of a wildcard subscription.
	Exact *string `yaml:"exact"`
	// Prefix matches strings that start with it. Must not be empty.
	Prefix *string `yaml:"prefix"`
	// Regex is an RE2 expression (https://github.com/google/re2/wiki/Syntax)
	// that must match the whole string, as in Envoy's safe_regex: "front.*"
	// matches "frontend" but not "my-frontend". Its capture groups, numbered
	// or named, can be used in the result's group key.
	Regex *string `yaml:"regex"`
}

// Target is the result of a rule: where matching requests are served from.
type Target struct {
	// Authority names the configured authority whose origins serve the
	// group. Required; must be one of the config's authorities.
	Authority string `yaml:"authority"`
	// Group is the list of parts concatenated into the group key. It needs
	// at least one literal part, so a key is never empty (the empty group is
	// the authority's stream for xdstp names): a single literal puts every
	// client the rule matches in one group. Two value parts (node_field,
	// capture) must be separated by a literal, so that ("ab","c") and
	// ("a","bc") cannot build the same key.
	Group []GroupPart `yaml:"group"`
	// Node, when set, is the Node the relay presents upstream on the
	// group's stream. Default: absent: a Node built from the group key
	// alone, the same whichever client of the group comes first: each node
	// field the key takes a value from holds that value (the whole field
	// for node_field, only the captured text for a capture, metadata as a
	// string at its path), with the relay's node id unless the key uses
	// node.id; never anything else a client sent (upstreamnode.go).
	Node *UpstreamNode `yaml:"node"`
}

// GroupPart is one part of a group key. Exactly one field must be set.
type GroupPart struct {
	// Literal is copied into the key as is. Must not be empty.
	Literal *string `yaml:"literal"`
	// NodeField copies a field of the client's Node: id, cluster,
	// locality.region, locality.zone, locality.sub_zone or metadata.<path>
	// (a path as in MetadataMatch; absent metadata is the empty string).
	NodeField *string `yaml:"node_field"`
	// Capture copies a capture group of one of the rule's regex conditions.
	Capture *Capture `yaml:"capture"`
}

// Capture names a capture group of a regex in the same rule's match.
type Capture struct {
	// From names the condition whose regex is captured: resource_name,
	// node.id, node.cluster, node.locality.region, node.locality.zone,
	// node.locality.sub_zone or node.metadata.<path> (the first metadata
	// condition with that path). That condition must use regex. Required.
	From string `yaml:"from"`
	// Group is the capture group: its number (1 is the first group, 0 the
	// whole value) or its name ((?P<name>...)). Required. A group that did
	// not take part in the match contributes the empty string.
	Group string `yaml:"group"`
}

// UpstreamNode is the Node the relay presents upstream for a group. At least
// one field must be set.
type UpstreamNode struct {
	// ID is the node.id sent upstream. Default: empty.
	ID string `yaml:"id"`
	// Cluster is the node.cluster sent upstream. Default: empty.
	Cluster string `yaml:"cluster"`
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
