package aggregation

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// NodeMetadata builds a node's metadata, as rules read it, from values
// written as text (what `xds-relay explain --node-metadata` and
// `--node-metadata-json` take): strs are path=value pairs, the value a
// string; typed are path=JSON pairs, the value of any JSON type, or JSON
// objects whose top-level keys (which may contain dots) are set as they
// are. A path's dot-separated keys make nested structs. An error names
// the pair: a key set twice, a path through a value, an empty key, JSON
// that does not parse, a pair with no path.
func NodeMetadata(strs, typed []string) (*structpb.Struct, error) {
	root := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	paths, values, objects, err := metadataValues(strs, typed)
	if err != nil {
		return nil, err
	}
	for _, o := range objects {
		if err := mergeMetadataObject(root, o); err != nil {
			return nil, err
		}
	}
	for n, p := range paths {
		if err := setMetadataPath(root, p, values[n]); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// metadataValues splits the pairs into path=value pairs, each path with
// its value (strings first, then the typed ones), and JSON objects.
func metadataValues(pairs, typed []string) (paths []string, values []*structpb.Value, objects []string, err error) {
	values = make([]*structpb.Value, 0, len(pairs)+len(typed))
	paths = append([]string{}, pairs...)
	for _, p := range pairs {
		path, value, ok := strings.Cut(p, "=")
		if !ok || path == "" {
			return nil, nil, nil, fmt.Errorf("%q: want path=value", p)
		}
		values = append(values, structpb.NewStringValue(value))
	}
	for _, p := range typed {
		if strings.HasPrefix(strings.TrimSpace(p), "{") {
			objects = append(objects, p)
			continue
		}
		path, value, ok := strings.Cut(p, "=")
		if !ok || path == "" {
			return nil, nil, nil, fmt.Errorf("%q: want path=JSON or a JSON object", p)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			return nil, nil, nil, fmt.Errorf("%q: not JSON: %v", p, err)
		}
		sv, err := structpb.NewValue(v)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%q: %v", p, err)
		}
		values = append(values, sv)
		paths = append(paths, p)
	}
	return paths, values, objects, nil
}

// mergeMetadataObject adds the top-level keys of the JSON object o to
// root; a key set twice is an error.
func mergeMetadataObject(root *structpb.Struct, o string) error {
	var obj map[string]any
	if err := json.Unmarshal([]byte(o), &obj); err != nil {
		return fmt.Errorf("%q: not a JSON object: %v", o, err)
	}
	st, err := structpb.NewStruct(obj)
	if err != nil {
		return fmt.Errorf("%q: %v", o, err)
	}
	for k, v := range st.GetFields() {
		if _, dup := root.Fields[k]; dup {
			return fmt.Errorf("%q: %s is set twice", o, k)
		}
		root.Fields[k] = v
	}
	return nil
}

// setMetadataPath sets v at the dot-separated path of p (path=value) in
// root, making the structs on the way.
func setMetadataPath(root *structpb.Struct, p string, v *structpb.Value) error {
	path, _, _ := strings.Cut(p, "=")
	keys := strings.Split(path, ".")
	s := root
	for i, k := range keys {
		if k == "" {
			return fmt.Errorf("%q: empty key in path", p)
		}
		if i == len(keys)-1 {
			if _, dup := s.Fields[k]; dup {
				return fmt.Errorf("%q: %s is set twice", p, path)
			}
			s.Fields[k] = v
			return nil
		}
		next := s.Fields[k]
		if next == nil {
			next = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{}})
			s.Fields[k] = next
		}
		if next.GetStructValue() == nil {
			return fmt.Errorf("%q: %s is a value, not a struct", p, strings.Join(keys[:i+1], "."))
		}
		s = next.GetStructValue()
	}
	return nil
}
