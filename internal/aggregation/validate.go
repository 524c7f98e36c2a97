package aggregation

// FieldError is one problem in a rule set. Path is relative to the
// aggregation key, e.g. "rules[2].match.node.id.regex".
type FieldError struct {
	Path    string
	Problem string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Problem }

// Validate checks every rule and returns every problem found, each with its
// path: names present and unique; the default rule last and without
// conditions; every other rule with at least one condition; type URLs well
// formed; each string matcher with exactly one of exact, prefix, regex,
// not, all_of (all_of not empty), and every regex compiling; metadata
// paths written as exactly one of path and keys, with no empty key, and
// tested by exactly one of value, string, bool, present; a refusing rule
// with a reason and no authority, group or node; otherwise the authority
// one of authorities; the group with at least one literal, no two value
// parts adjacent, every part exactly one of literal, node_field, capture,
// rewrite, metadata, node fields known, captures naming a regex condition
// of the same rule and a group it has, rewrites with a known source, a
// regex that compiles and a replacement naming only its groups, metadata
// parts with keys and a type, refuse_empty only on value parts; the
// upstream node with a field set and metadata values that are values.
func Validate(rules []Rule, authorities []string) []FieldError {
	_, problems := compile(rules, authorities, true)
	return problems
}
