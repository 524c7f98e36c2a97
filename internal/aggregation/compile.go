package aggregation

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Rules is a compiled, immutable rule set, safe for concurrent use.
type Rules struct {
	rules     []compiledRule // read-only after Compile
	keep      []keptPath     // the metadata KeepNode keeps; read-only after Compile
	keepEmpty bool           // KeepNode keeps an empty metadata (has_metadata); read-only after Compile
}

// compiledRule is a Rule with its regexes compiled and references resolved.
type compiledRule struct {
	name      string
	typeURLs  []string    // empty: any type
	conds     []condition // all must be met
	refuse    string      // the reason, for a rule whose result refuses
	authority string
	parts     []keyPart
	fixedKey  string       // the key when every part is a literal, else ""
	node      *corev3.Node // the rule's result.node, or nil
	slots     []nodeSlot   // the node fields the key takes values from (upstreamnode.go)
	memo      *groupMemo   // the groups built, when node is nil (groupmemo.go)
}

// Compile compiles rules. It checks everything Validate checks except that
// authorities exist (Compile does not know them), and returns an error
// wrapping ErrInvalidRules that lists every problem.
func Compile(rules []Rule) (*Rules, error) {
	compiled, problems := compile(rules, nil, false)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = p
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidRules, errors.Join(errs...))
	}
	r := &Rules{rules: compiled}
	r.keep, r.keepEmpty = keptPaths(compiled)
	return r, nil
}

// checker collects problems while rules are compiled.
type checker struct {
	problems []FieldError
}

func (c *checker) add(path, format string, args ...any) {
	c.problems = append(c.problems, FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

// compile walks every rule, compiling what is valid and recording every
// problem with its path. authorities are checked only if checkAuthorities.
func compile(rules []Rule, authorities []string, checkAuthorities bool) ([]compiledRule, []FieldError) {
	c := &checker{}
	out := make([]compiledRule, 0, len(rules))
	names := make(map[string]int, len(rules))
	for i := range rules {
		r := &rules[i]
		p := fmt.Sprintf("rules[%d]", i)
		cr := compiledRule{name: r.Name, memo: &groupMemo{}}

		switch prev, dup := names[r.Name]; {
		case r.Name == "":
			c.add(p+".name", "required")
		case dup:
			c.add(p+".name", "%q is already the name of rules[%d]", r.Name, prev)
		default:
			names[r.Name] = i
		}
		if r.Default && i != len(rules)-1 {
			c.add(p+".default", "the default rule must be the last rule: the rules after it could never match")
		}

		regexes := c.match(&cr, p+".match", &r.Match)
		switch written := r.Match.hasConditions(); {
		case r.Default && written:
			c.add(p+".match", "a default rule matches every request and has no conditions")
		case !r.Default && !written:
			c.add(p+".match", "no conditions: a rule that matches every request is written default: true, as the last rule")
		}
		c.target(&cr, p+".result", &r.Result, regexes, authorities, checkAuthorities)
		out = append(out, cr)
	}
	return out, c.problems
}

// exactlyOne checks that set, the names of the fields written at p, has
// exactly one of choices.
func (c *checker) exactlyOne(p, choices string, set []string) bool {
	switch len(set) {
	case 0:
		c.add(p, "one of %s is required", choices)
		return false
	case 1:
		return true
	}
	c.add(p, "exactly one of %s may be set, found %s", choices, strings.Join(set, " and "))
	return false
}

// metadataPath checks a metadata path written as path (dot-separated) or
// keys (a list), exactly one of them, and returns its keys.
func (c *checker) metadataPath(p, path string, keys []string) ([]string, bool) {
	switch {
	case path == "" && len(keys) == 0:
		c.add(p+".path", "required (or keys, a list of keys)")
		return nil, false
	case path != "" && len(keys) > 0:
		c.add(p, "exactly one of path or keys may be set, found path and keys")
		return nil, false
	case path != "":
		k, ok := splitPath(path)
		if !ok {
			c.add(p+".path", "%q has an empty key (want dot-separated keys, e.g. team.name)", path)
		}
		return k, ok
	}
	for i, k := range keys {
		if k == "" {
			c.add(fmt.Sprintf("%s.keys[%d]", p, i), "empty")
			return nil, false
		}
	}
	return keys, true
}

// metadataKeys checks a metadata path written as keys only (a key part,
// a rewrite's from: node.metadata).
func (c *checker) metadataKeys(p string, keys []string, why string) ([]string, bool) {
	if len(keys) == 0 {
		c.add(p+".keys", "required%s", why)
		return nil, false
	}
	return c.metadataPath(p, "", keys)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
