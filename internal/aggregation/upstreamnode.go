package aggregation

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The upstream node of a group whose rule sets no node is a function of the
// group key alone: every client of the group, whichever comes first, makes
// the relay show the origin the same Node. It has, for each node field the
// key takes a value from, that value:
//
//   - a field the key copies whole (a node_field part, or a capture of group
//     0) shows its whole value;
//   - a field the key only captures pieces of (or rewrites) shows the
//     captured (rewritten) text, the pieces joined by nodePieceSep in key
//     order (cluster "staging-1" captured as "staging" shows "staging",
//     never "staging-1");
//   - a metadata path shows the key's text as a string at that path (numbers
//     and bools as the key writes them: "3", "true");
//   - an empty value is not shown, and node.id empty means the relay's own;
//   - resource_name captures are not node fields and are not shown.
//
// Nothing else a client sent (other fields, other metadata) is shown.

// nodePieceSep joins the captured pieces of one field in its upstream value.
const nodePieceSep = "/"

// nodeSlot is one node field the group key takes a value from.
type nodeSlot struct {
	field field
	whole int   // index in the rule's parts of a part copying the whole field, or -1
	parts []int // indices in the rule's parts of its captured pieces, in key order
}

// nodeSlots lists, in key order of first use, the node fields parts take
// values from; resource_name is not a node field.
func nodeSlots(parts []keyPart) []nodeSlot {
	var slots []nodeSlot
	for i := range parts {
		p := &parts[i]
		if p.kind == partLiteral || p.field.kind == fieldResourceName {
			continue
		}
		s := slotFor(&slots, p.field)
		if p.kind == partField || p.kind == partCapture && p.group == 0 {
			if s.whole < 0 {
				s.whole = i
			}
			continue
		}
		s.parts = append(s.parts, i)
	}
	return slots
}

// slotFor returns the slot of f in slots, appending one if there is none.
func slotFor(slots *[]nodeSlot, f field) *nodeSlot {
	for i := range *slots {
		s := &(*slots)[i]
		if s.field.kind == f.kind && samePath(s.field.path, f.path) {
			return s
		}
	}
	*slots = append(*slots, nodeSlot{field: f, whole: -1})
	return &(*slots)[len(*slots)-1]
}

// groupNode builds the upstream node from vals, the values of the rule's key
// parts (see the comment at the top of this file).
func (cr *compiledRule) groupNode(vals []string) *corev3.Node {
	n := &corev3.Node{}
	for i := range cr.slots {
		s := &cr.slots[i]
		var v string
		if s.whole >= 0 {
			v = vals[s.whole]
		} else {
			pieces := make([]string, len(s.parts))
			for j, k := range s.parts {
				pieces[j] = vals[k]
			}
			v = strings.Join(pieces, nodePieceSep)
		}
		if v == "" {
			continue
		}
		setNodeField(n, s.field, v)
	}
	return n
}

// setNodeField sets field f of n to v.
func setNodeField(n *corev3.Node, f field, v string) {
	switch f.kind {
	case fieldNodeID:
		n.Id = v
	case fieldNodeCluster:
		n.Cluster = v
	case fieldRegion, fieldZone, fieldSubZone:
		if n.Locality == nil {
			n.Locality = &corev3.Locality{}
		}
		switch f.kind {
		case fieldRegion:
			n.Locality.Region = v
		case fieldZone:
			n.Locality.Zone = v
		default:
			n.Locality.SubZone = v
		}
	case fieldMetadata:
		if n.Metadata == nil {
			n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		}
		setMetadata(n.Metadata, f.path, v)
	}
}

// setMetadata sets the string v at path in s, making the structs on the way;
// a value on the way that is not a struct is replaced by one (a key using
// both "a" and "a.b" shows the later of the two, in key order).
func setMetadata(s *structpb.Struct, path []string, v string) {
	for _, k := range path[:len(path)-1] {
		next := s.Fields[k].GetStructValue()
		if next == nil {
			next = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			s.Fields[k] = structpb.NewStructValue(next)
		}
		s = next
	}
	s.Fields[path[len(path)-1]] = structpb.NewStringValue(v)
}
