package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	// maxDepth bounds nesting (and alias chains) in a config document.
	maxDepth = 64
	// Decoding visits each node once, and again for each alias or merge
	// that refers to it. Visits are bounded by visitsPerNode times the
	// document's nodes plus minVisits, so that aliases that expand
	// exponentially ("billion laughs", merges of merges) fail at once
	// instead of hanging and reporting millions of problems.
	visitsPerNode = 16
	minVisits     = 4096
	// maxProblems bounds the problems reported; the rest are counted.
	maxProblems = 100
)

var (
	durationType    = reflect.TypeOf(time.Duration(0))
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

// strictDecoder decodes a yaml.Node tree into Go values field by field, so
// that every unknown key and every badly typed value is reported with its
// field path and line, and decoding carries on past each problem.
type strictDecoder struct {
	problems  []*FieldError
	covered   map[string]bool // paths whose value was not read as written
	visits    int
	maxVisits int // see visitsPerNode
}

func newStrictDecoder(nodes int) *strictDecoder {
	return &strictDecoder{maxVisits: visitsPerNode*nodes + minVisits}
}

func (d *strictDecoder) problem(path string, line int, format string, args ...any) {
	d.problems = append(d.problems, &FieldError{Path: path, Line: line, Problem: fmt.Sprintf(format, args...)})
	d.cover(path)
}

// cover records that path's value was not read as written: a problem there
// explains any that validation finds at or under it.
func (d *strictDecoder) cover(path string) {
	if d.covered == nil {
		d.covered = make(map[string]bool)
	}
	d.covered[path] = true
}

// derived reports whether a validation problem at path follows from a
// decoding problem: at path or at a path enclosing it (the value it
// checks was not read as written).
func (d *strictDecoder) derived(path string) bool {
	for {
		if d.covered[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

// stopped reports that decoding gave up: the visit budget is spent or there
// are more problems than anyone will read.
func (d *strictDecoder) stopped() bool {
	return d.visits >= d.maxVisits || len(d.problems) > maxProblems
}

// decode sets v (addressable) from n. Fields n does not mention keep their
// current value, which is how defaults survive.
func (d *strictDecoder) decode(n *yaml.Node, v reflect.Value, path string, depth int) {
	if !d.enter(n, path, depth) {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			d.decode(n.Content[0], v, path, depth+1)
		}
		return
	case yaml.AliasNode:
		d.decode(n.Alias, v, path, depth+1)
		return
	}
	if isNull(n) {
		// "key:" with no value: leave the default in place.
		return
	}
	d.value(n, v, path, depth)
}

// enter counts a visit to n and reports whether to decode it: not when
// decoding stopped, the visit budget is spent now, or n is nested too deep.
func (d *strictDecoder) enter(n *yaml.Node, path string, depth int) bool {
	if d.stopped() {
		return false
	}
	d.visits++
	if d.visits == d.maxVisits {
		d.problem(path, n.Line, "aliases and merges expand too far (more than %d nodes); decoding stopped here", d.maxVisits)
		return false
	}
	if depth > maxDepth {
		d.problem(path, n.Line, "nested too deeply")
		return false
	}
	return true
}

// value sets v from a node that holds a value (not a document, an alias
// or null), by v's type.
func (d *strictDecoder) value(n *yaml.Node, v reflect.Value, path string, depth int) {
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.problem(path, n.Line, "%s", cleanYAMLError(err))
		}
		return
	}
	if v.Type() == durationType {
		d.duration(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path, depth+1)
	case reflect.Struct:
		d.structFields(n, v, path, depth)
	case reflect.Slice:
		d.sliceElems(n, v, path, depth)
	case reflect.Map:
		d.mapEntries(n, v, path, depth)
	case reflect.Interface:
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.problem(path, n.Line, "%s", cleanYAMLError(err))
		}
	default:
		d.scalar(n, v, path)
	}
}

// sliceElems decodes a list into a slice, replacing what it held.
func (d *strictDecoder) sliceElems(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.SequenceNode {
		d.problem(path, n.Line, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, c := range n.Content {
		d.decode(c, s.Index(i), joinIndex(path, i), depth+1)
	}
	v.Set(s)
}

// scalar decodes a scalar into a string, bool or number; an integer field
// takes integers only.
func (d *strictDecoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.problem(path, n.Line, "want %s, got %s", typeName(v.Type()), describe(n))
		return
	}
	if isInteger(v.Kind()) && n.ShortTag() != "!!int" {
		// yaml would truncate 2.5 to 2 and read 1e3 as 1000: an
		// integer field takes integers only.
		d.problem(path, n.Line, "want %s, got %q", typeName(v.Type()), n.Value)
		return
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.problem(path, n.Line, "want %s, got %q", typeName(v.Type()), n.Value)
	}
}

// structFields decodes a mapping into a struct; keys that name no field are
// errors.
func (d *strictDecoder) structFields(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.problem(path, n.Line, "want a mapping, got %s", describe(n))
		return
	}
	// Merged mappings ("<<: *anchor" or "<<: [*a, *b]") first: explicit
	// keys override them, and in a list the earlier mapping wins.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !isMerge(n.Content[i]) {
			continue
		}
		m := n.Content[i+1]
		if m.Kind == yaml.SequenceNode {
			for j := len(m.Content) - 1; j >= 0; j-- {
				d.decode(m.Content[j], v, path, depth+1)
			}
			continue
		}
		d.decode(m, v, path, depth+1)
	}
	fields := yamlFields(v.Type())
	seen := map[string]int{} // key -> line of its first occurrence
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if isMerge(k) {
			continue
		}
		p := joinKey(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.problem(p, k.Line, "duplicate key %q (first at line %d)", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		idx, ok := fields[k.Value]
		if !ok {
			if best := suggest(k.Value, fields); best != "" {
				d.problem(p, k.Line, "unknown key %q (did you mean %q?)", k.Value, best)
				d.cover(joinKey(path, best)) // its value is under the misspelt key
			} else {
				d.problem(p, k.Line, "unknown key %q", k.Value)
			}
			continue
		}
		d.decode(val, v.FieldByIndex(idx), p, depth+1)
	}
}

func (d *strictDecoder) mapEntries(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.problem(path, n.Line, "want a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		p := joinKey(path, k.Value)
		key := reflect.New(v.Type().Key()).Elem()
		d.decode(k, key, p, depth+1)
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, p, depth+1)
		v.SetMapIndex(key, elem)
	}
}

func (d *strictDecoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.problem(path, n.Line, "want a duration such as \"30s\", got %s", describe(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.problem(path, n.Line, "want a duration such as \"30s\" or \"250ms\", got %q", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

// yamlFields maps YAML keys to struct field indexes, following the yaml tag
// (name, "-", ",inline").
func yamlFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			for k, idx := range yamlFields(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = []int{i}
	}
	return out
}

// suggest returns the known key closest to key ("" when none is close).
func suggest(key string, fields map[string][]int) string {
	best, bestDist := "", 3
	for name := range fields {
		if dist := editDistance(key, name); dist < bestDist || (dist == bestDist && best != "" && name < best) {
			best, bestDist = name, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%q", n.Value)
	}
	return "a " + kindName(n.Kind)
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "node"
}

// isInteger: k is a signed or unsigned integer kind.
func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}

// cleanYAMLError drops yaml's "yaml: unmarshal errors:\n  line N: " framing
// from an error returned by a custom unmarshaler; the line is reported
// separately.
func cleanYAMLError(err error) string {
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			if _, rest, ok := strings.Cut(m, ": "); ok && strings.HasPrefix(m, "line ") {
				m = rest
			}
			msgs[i] = m
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
