package aggregation

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

type partKind uint8

const (
	partLiteral partKind = iota
	partField
	partCapture
	partRewrite
)

// keyPart is a compiled GroupPart.
type keyPart struct {
	kind        partKind
	literal     string
	field       field          // partField, partCapture, partRewrite
	re          *regexp.Regexp // partCapture: the condition's regex; partRewrite: its own
	group       int            // partCapture: submatch index
	replace     string         // partRewrite: the template
	refuseEmpty bool           // an empty value refuses the request
	path        string         // of the part, for refusals
}

// target compiles a rule's result into cr.
func (c *checker) target(cr *compiledRule, p string, t *Target, regexes []regexCondition, authorities []string, checkAuthorities bool) {
	if t.Refuse != nil {
		c.refuse(cr, p, t)
		return
	}
	switch {
	case t.Authority == "":
		c.add(p+".authority", "required")
	case checkAuthorities && !contains(authorities, t.Authority):
		c.add(p+".authority", "%q is not a configured authority (have: %s)", t.Authority, strings.Join(authorities, ", "))
	}
	cr.authority = t.Authority
	c.group(cr, p+".group", t.Group, regexes)
	cr.slots = nodeSlots(cr.parts)
	if n := t.Node; n != nil {
		c.resultNode(cr, p+".node", n)
	}
}

// refuse compiles a result that refuses (at p) into cr: a reason, and
// nothing served.
func (c *checker) refuse(cr *compiledRule, p string, t *Target) {
	if t.Refuse.Reason == "" {
		c.add(p+".refuse.reason", "required: what the refused client is told")
	}
	cr.refuse = t.Refuse.Reason
	if cr.refuse == "" {
		cr.refuse = "refused"
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"authority", t.Authority != ""}, {"group", len(t.Group) > 0}, {"node", t.Node != nil}} {
		if f.set {
			c.add(p+"."+f.name, "a rule that refuses serves nothing: leave %s out", f.name)
		}
	}
}

// group compiles a result's group parts (at gp) into cr: at least one
// literal, never two value parts side by side; the key itself when every
// part is a literal.
func (c *checker) group(cr *compiledRule, gp string, group []GroupPart, regexes []regexCondition) {
	if len(group) == 0 {
		c.add(gp, "required: at least one part (a literal alone puts every client the rule matches in one group)")
	}
	literals, fixed := 0, true
	var key strings.Builder
	for j := range group {
		part, ok := c.part(fmt.Sprintf("%s[%d]", gp, j), &group[j], regexes)
		if !ok {
			continue
		}
		if part.kind == partLiteral {
			literals++
			key.WriteString(part.literal)
		} else {
			fixed = false
			if j > 0 && group[j-1].Literal == nil {
				c.add(fmt.Sprintf("%s[%d]", gp, j), "follows another value part with no literal between them: the key would be ambiguous (add e.g. - literal: \"/\")")
			}
		}
		cr.parts = append(cr.parts, part)
	}
	if len(group) > 0 && literals == 0 {
		c.add(gp, "needs at least one literal part, so that no group key is empty (the empty group is the authority's xdstp stream)")
	}
	if fixed {
		cr.fixedKey = key.String()
	}
}

// resultNode compiles a result's node (at np) into cr: the node presented
// upstream, with its metadata as a struct.
func (c *checker) resultNode(cr *compiledRule, np string, n *UpstreamNode) {
	if n.ID == "" && n.Cluster == "" && len(n.Metadata) == 0 {
		c.add(np, "set id, cluster or metadata, or leave node out to present the node built from the group key")
	}
	cr.node = &corev3.Node{Id: n.ID, Cluster: n.Cluster}
	if len(n.Metadata) > 0 {
		m := normalizeYAML(n.Metadata).(map[string]any)
		if at, v := unsupported("", m); at != "" {
			c.add(np+".metadata."+at, "a %T is not a metadata value (want a string, number, bool, null, list or map)", v)
		} else if md, err := structpb.NewStruct(m); err == nil {
			cr.node.Metadata = md
		}
	}
}

// normalizeYAML turns what YAML decodes into what structpb takes: maps
// with non-string keys get string keys, integers stay numbers.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeYAML(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeYAML(e)
		}
		return out
	}
	return v
}

// unsupported returns the path and value of the first value in v that
// is not a metadata value, or "".
func unsupported(path string, v any) (string, any) {
	switch x := v.(type) {
	case nil, string, bool, int, int64, uint64, float64:
		return "", nil
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if at, bad := unsupported(p, e); at != "" {
				return at, bad
			}
		}
		return "", nil
	case []any:
		for i, e := range x {
			if at, bad := unsupported(fmt.Sprintf("%s[%d]", path, i), e); at != "" {
				return at, bad
			}
		}
		return "", nil
	}
	if path == "" {
		path = "."
	}
	return path, v
}

// partChoices lists the kinds of group part, for problems.
const partChoices = "literal, node_field, capture, rewrite or metadata"

// part compiles one GroupPart.
func (c *checker) part(p string, g *GroupPart, regexes []regexCondition) (keyPart, bool) {
	var set []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"literal", g.Literal != nil}, {"node_field", g.NodeField != nil}, {"capture", g.Capture != nil}, {"rewrite", g.Rewrite != nil}, {"metadata", g.Metadata != nil}} {
		if k.set {
			set = append(set, k.name)
		}
	}
	if !c.exactlyOne(p, partChoices, set) {
		return keyPart{}, false
	}
	if g.Literal != nil {
		if g.RefuseEmpty {
			c.add(p+".refuse_empty", "a literal is never empty: refuse_empty is for value parts")
		}
		if *g.Literal == "" {
			c.add(p+".literal", "empty")
			return keyPart{}, false
		}
		return keyPart{kind: partLiteral, literal: *g.Literal}, true
	}
	part, ok := c.valuePart(p, g, regexes)
	part.refuseEmpty, part.path = g.RefuseEmpty, p
	return part, ok
}

// valuePart compiles a GroupPart that takes a value from the request.
func (c *checker) valuePart(p string, g *GroupPart, regexes []regexCondition) (keyPart, bool) {
	switch {
	case g.NodeField != nil:
		f, ok := parseNodeField(*g.NodeField)
		if !ok {
			c.add(p+".node_field", "%q is not a node field (want %s)", *g.NodeField, nodeFieldChoices)
			return keyPart{}, false
		}
		return keyPart{kind: partField, field: f}, true
	case g.Metadata != nil:
		keys, ok := c.metadataKeys(p+".metadata", g.Metadata.Keys, ": the path, a list of keys")
		typ, tok := c.valueType(p+".metadata.type", g.Metadata.Type)
		if !ok || !tok {
			return keyPart{}, false
		}
		return keyPart{kind: partField, field: field{kind: fieldMetadata, path: keys, typ: typ}}, true
	case g.Rewrite != nil:
		return c.rewrite(p+".rewrite", g.Rewrite)
	}
	return c.capture(p, g.Capture, regexes)
}

// capture compiles a capture part (of the part at p): a group of one of
// the rule's regex conditions.
func (c *checker) capture(p string, cp *Capture, regexes []regexCondition) (keyPart, bool) {
	f, ok := parseCaptureFrom(cp.From)
	if !ok {
		if cp.From == "" {
			c.add(p+".capture.from", "required (one of %s)", captureChoices)
		} else {
			c.add(p+".capture.from", "%q is not a request field (want %s)", cp.From, captureChoices)
		}
		return keyPart{}, false
	}
	var rc *regexCondition
	for k := range regexes {
		if regexes[k].field.kind == f.kind && samePath(regexes[k].field.path, f.path) {
			rc = &regexes[k]
			break
		}
	}
	if rc == nil {
		c.add(p+".capture.from", "this rule's match has no valid regex condition on %s", cp.From)
		return keyPart{}, false
	}
	if cp.Group == "" {
		c.add(p+".capture.group", "required: a group number or name of %s", rc.path)
		return keyPart{}, false
	}
	idx, err := strconv.Atoi(cp.Group)
	if err != nil {
		idx = rc.re.SubexpIndex(cp.Group)
		if idx < 0 {
			c.add(p+".capture.group", "%s has no group named %q", rc.path, cp.Group)
			return keyPart{}, false
		}
	} else if idx < 0 || idx > rc.re.NumSubexp() {
		c.add(p+".capture.group", "%s has %d capture groups, not %d", rc.path, rc.re.NumSubexp(), idx)
		return keyPart{}, false
	}
	return keyPart{kind: partCapture, field: rc.field, re: rc.re, group: idx}, true
}

// valueType parses a metadata value type.
func (c *checker) valueType(p, t string) (valueType, bool) {
	switch t {
	case "string":
		return typeString, true
	case "bool":
		return typeBool, true
	case "number":
		return typeNumber, true
	case "":
		c.add(p, "required: string, bool or number")
	default:
		c.add(p, "%q is not a metadata type (want string, bool or number)", t)
	}
	return typeAny, false
}

// rewrite compiles a rewrite part.
func (c *checker) rewrite(p string, rw *Rewrite) (keyPart, bool) {
	ok := true
	var f field
	switch {
	case rw.From == "":
		c.add(p+".from", "required (one of %s, or node.metadata with keys and type)", captureChoices)
		ok = false
	case rw.From == nodePrefix+"metadata":
		keys, kok := c.metadataKeys(p, rw.Keys, " with from: node.metadata")
		typ, tok := c.valueType(p+".type", rw.Type)
		f, ok = field{kind: fieldMetadata, path: keys, typ: typ}, kok && tok
	default:
		var fok bool
		f, fok = parseCaptureFrom(rw.From)
		if !fok {
			c.add(p+".from", "%q is not a request field (want %s, or node.metadata with keys and type)", rw.From, captureChoices)
			ok = false
		}
		if len(rw.Keys) > 0 || rw.Type != "" {
			c.add(p, "keys and type are for from: node.metadata")
			ok = false
		}
	}
	if rw.Regex == "" {
		c.add(p+".regex", "required")
		return keyPart{}, false
	}
	re, err := regexp.Compile(rw.Regex)
	if err != nil {
		c.add(p+".regex", "does not compile: %v", err)
		return keyPart{}, false
	}
	for _, ref := range templateRefs(rw.Replace) {
		if _, err := strconv.Atoi(ref); err == nil {
			if n, _ := strconv.Atoi(ref); n <= re.NumSubexp() {
				continue
			}
		} else if re.SubexpIndex(ref) >= 0 {
			continue
		}
		c.add(p+".replace", "refers to group %q, which the regex does not have (it has %d; write ${1}x for group 1 followed by x)", ref, re.NumSubexp())
		ok = false
	}
	return keyPart{kind: partRewrite, field: f, re: re, replace: rw.Replace}, ok
}
