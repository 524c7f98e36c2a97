package aggregation

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// KeepNode returns the part of n that rules can read: id, cluster,
// locality, the metadata scalars at the paths some rule tests or builds a
// group key from (a null where a present condition only needs to know a
// value is there), and an empty metadata when a has_metadata condition
// needs to know there was one. Nothing else of a client's Node needs to be
// kept for as long as its stream lives (the relay's per-stream memory).
// Matching the result gives what matching n gives.
func (r *Rules) KeepNode(n *corev3.Node) *corev3.Node {
	kept := KeepNodeFields(n)
	if kept == nil || n.GetMetadata() == nil || r == nil {
		return kept
	}
	if r.keepEmpty {
		kept.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	for _, k := range r.keep {
		kept.Metadata = keepMetadata(kept.Metadata, n.GetMetadata(), k.field, k.presence)
	}
	return kept
}

// keptPath is a metadata path some rule reads, and whether a present
// condition tests it.
type keptPath struct {
	field    field
	presence bool
}

// keptPaths lists, once each and in rule order, the metadata paths rules
// read, and whether some rule tests has_metadata: what KeepNode keeps.
func keptPaths(rules []compiledRule) (paths []keptPath, empty bool) {
	add := func(f field, presence bool) {
		if f.kind != fieldMetadata {
			return
		}
		for i := range paths {
			if samePath(paths[i].field.path, f.path) {
				paths[i].presence = paths[i].presence || presence
				return
			}
		}
		paths = append(paths, keptPath{field: f, presence: presence})
	}
	for _, cr := range rules {
		for _, c := range cr.conds {
			empty = empty || c.kind == condHasMetadata
			add(c.field, c.kind == condPresent)
		}
		for _, p := range cr.parts {
			if p.kind != partLiteral {
				add(p.field, false)
			}
		}
	}
	return paths, empty
}

// KeepNodeFields returns n's id, cluster and locality, nil for nil: what
// is kept of a client's Node when no rule reads its metadata.
func KeepNodeFields(n *corev3.Node) *corev3.Node {
	if n == nil {
		return nil
	}
	kept := &corev3.Node{Id: n.GetId(), Cluster: n.GetCluster()}
	if l := n.GetLocality(); l != nil {
		kept.Locality = &corev3.Locality{Region: l.GetRegion(), Zone: l.GetZone(), SubZone: l.GetSubZone()}
	}
	return kept
}

// keepMetadata copies into dst (created when nil) the value at f's
// metadata path in src, if f is a metadata field and a scalar is there; with
// presence (a present condition), a null, list or struct too, as a null:
// what rules can tell of it is that it is there, and not a scalar.
func keepMetadata(dst, src *structpb.Struct, f field, presence bool) *structpb.Struct {
	if f.kind != fieldMetadata {
		return dst
	}
	v := src
	for i, k := range f.path {
		val := v.GetFields()[k]
		if val == nil {
			return dst
		}
		if i < len(f.path)-1 {
			if v = val.GetStructValue(); v == nil {
				return dst
			}
			continue
		}
		switch val.GetKind().(type) {
		case *structpb.Value_StringValue, *structpb.Value_NumberValue, *structpb.Value_BoolValue:
			val = proto.Clone(val).(*structpb.Value) // a scalar: small
		default:
			if !presence {
				return dst
			}
			val = structpb.NewNullValue()
		}
		if dst == nil {
			dst = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		}
		at := dst
		for _, p := range f.path[:len(f.path)-1] {
			next := at.GetFields()[p].GetStructValue()
			if next == nil {
				next = &structpb.Struct{Fields: map[string]*structpb.Value{}}
				at.Fields[p] = structpb.NewStructValue(next)
			}
			at = next
		}
		if _, isNull := val.GetKind().(*structpb.Value_NullValue); isNull && at.Fields[k].GetStructValue() != nil {
			return dst // a longer path kept a struct here: it is present already
		}
		at.Fields[k] = val
	}
	return dst
}
