package aggregation

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// fieldKind names a value of a request that rules can test or copy.
type fieldKind uint8

const (
	fieldResourceName fieldKind = iota
	fieldNodeID
	fieldNodeCluster
	fieldRegion
	fieldZone
	fieldSubZone
	fieldMetadata
)

// valueType restricts a metadata field to values of one type.
type valueType uint8

const (
	typeAny    valueType = iota // any scalar, formatted
	typeString                  // strings only
	typeBool                    // bools only, as "true"/"false"
	typeNumber                  // numbers only, shortest decimal form
)

// field is a value of a request: a fixed field, or a metadata path.
type field struct {
	kind fieldKind
	path []string  // metadata keys, for fieldMetadata
	typ  valueType // for fieldMetadata
}

// nodeFieldNames are the fixed node fields, as written in node_field.
var nodeFieldNames = map[string]fieldKind{
	"id":                fieldNodeID,
	"cluster":           fieldNodeCluster,
	"locality.region":   fieldRegion,
	"locality.zone":     fieldZone,
	"locality.sub_zone": fieldSubZone,
}

const (
	metadataPrefix   = "metadata."
	nodePrefix       = "node."
	resourceNameFrom = "resource_name"
	nodeFieldChoices = "id, cluster, locality.region, locality.zone, locality.sub_zone or metadata.<path>"
	captureChoices   = "resource_name, node.id, node.cluster, node.locality.region, node.locality.zone, node.locality.sub_zone or node.metadata.<path>"
)

// parseNodeField parses a node_field value: a fixed field or metadata.<path>.
func parseNodeField(s string) (field, bool) {
	if k, ok := nodeFieldNames[s]; ok {
		return field{kind: k}, true
	}
	if p, ok := strings.CutPrefix(s, metadataPrefix); ok {
		keys, ok := splitPath(p)
		return field{kind: fieldMetadata, path: keys}, ok
	}
	return field{}, false
}

// parseCaptureFrom parses a capture's from: resource_name or node.<node_field>.
func parseCaptureFrom(s string) (field, bool) {
	if s == resourceNameFrom {
		return field{kind: fieldResourceName}, true
	}
	if rest, ok := strings.CutPrefix(s, nodePrefix); ok {
		return parseNodeField(rest)
	}
	return field{}, false
}

// splitPath splits a dot-separated metadata path; no key may be empty.
func splitPath(p string) ([]string, bool) {
	keys := strings.Split(p, ".")
	for _, k := range keys {
		if k == "" {
			return nil, false
		}
	}
	return keys, true
}

// samePath reports whether two metadata paths are equal.
func samePath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// value returns the field's value in req, and false for a metadata path that
// is absent or does not end at a string, number or bool. Unset node fields
// are "" (proto3 strings have no presence).
func (f field) value(req *Request) (string, bool) {
	n := req.Node
	switch f.kind {
	case fieldResourceName:
		return req.Name, true
	case fieldNodeID:
		return n.GetId(), true
	case fieldNodeCluster:
		return n.GetCluster(), true
	case fieldRegion:
		return n.GetLocality().GetRegion(), true
	case fieldZone:
		return n.GetLocality().GetZone(), true
	case fieldSubZone:
		return n.GetLocality().GetSubZone(), true
	case fieldMetadata:
		return metadataValue(n.GetMetadata(), f.path, f.typ)
	}
	return "", false
}

// metadataLookup walks path through nested Structs and returns the value
// at its end, of any kind, or nil when the path is absent.
func metadataLookup(s *structpb.Struct, path []string) *structpb.Value {
	var v *structpb.Value
	for i, k := range path {
		v = s.GetFields()[k]
		if v == nil {
			return nil
		}
		if i < len(path)-1 {
			s = v.GetStructValue()
			if s == nil {
				return nil
			}
		}
	}
	return v
}

// metadataValue walks path through nested Structs and formats the scalar at
// its end if it has type typ (any scalar for typeAny). Only numbers and
// bools allocate.
func metadataValue(s *structpb.Struct, path []string, typ valueType) (string, bool) {
	switch k := metadataLookup(s, path).GetKind().(type) {
	case *structpb.Value_StringValue:
		if typ == typeAny || typ == typeString {
			return k.StringValue, true
		}
	case *structpb.Value_NumberValue:
		if typ == typeAny || typ == typeNumber {
			return strconv.FormatFloat(k.NumberValue, 'f', -1, 64), true
		}
	case *structpb.Value_BoolValue:
		if typ == typeAny || typ == typeBool {
			return strconv.FormatBool(k.BoolValue), true
		}
	}
	return "", false
}
