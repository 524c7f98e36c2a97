package aggregation

import (
	"errors"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Placeholder contract: the schema and the matcher land with issue #5. The
// config package and the downstream resolver are written against these
// names so they can be built in parallel.

// Rule is one aggregation rule as written in YAML under aggregation.rules.
type Rule struct{}

// FieldError is one problem in a rule set. Path is relative to the
// aggregation key, e.g. "rules[2].match.node.id.regex".
type FieldError struct {
	Path    string
	Problem string
}

// Validate checks every rule (regexes compile, named authorities exist) and
// returns every problem found.
func Validate(rules []Rule, authorities []string) []FieldError { return nil }

// ErrNoMatch is returned by Match when no rule matches a request.
var ErrNoMatch = errors.New("no aggregation rule matches")

// Request is what a client asked for, as matching sees it.
type Request struct {
	TypeURL string
	Name    string // resource name; "" for a wildcard subscription
	Node    *corev3.Node
}

// Result says where a request is served from.
type Result struct {
	Rule      string       // the matching rule's name
	Authority string       // whose origins serve the group
	Group     string       // group key; clients with equal (Authority, Group) share one upstream stream
	Node      *corev3.Node // Node the rule sets for the upstream stream; nil: the group's first client's
}

// Rules is a compiled, immutable rule set, safe for concurrent use.
type Rules struct{}

// Compile compiles rules (already validated).
func Compile(rules []Rule) (*Rules, error) { return &Rules{}, nil }

// Match returns the first rule that matches req, or an error wrapping ErrNoMatch.
func (r *Rules) Match(req Request) (Result, error) { return Result{}, ErrNoMatch }
