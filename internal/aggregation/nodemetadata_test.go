package aggregation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestNodeMetadata(t *testing.T) {
	tests := []struct {
		name    string
		strs    []string
		typed   []string
		want    map[string]any
		wantErr string // a substring, when set
	}{
		{
			name: "strings at dotted paths make nested structs",
			strs: []string{"deploy.track=canary", "team=payments", "deploy.zone=a=b"},
			want: map[string]any{"deploy": map[string]any{"track": "canary", "zone": "a=b"}, "team": "payments"},
		},
		{
			name:  "typed values keep their JSON type; a string written as JSON stays a string",
			strs:  []string{"t=true"},
			typed: []string{"flag=true", "n=3", "s=\"true\"", "z=null", "o={\"k\":[1,\"x\"]}"},
			want:  map[string]any{"t": "true", "flag": true, "n": 3.0, "s": "true", "z": nil, "o": map[string]any{"k": []any{1.0, "x"}}},
		},
		{
			name:  "a JSON object's keys are set as they are, dots and all",
			strs:  []string{"team=pay"},
			typed: []string{` {"istio.io": true}`},
			want:  map[string]any{"istio.io": true, "team": "pay"},
		},
		{name: "a path set twice", strs: []string{"a=1", "a=2"}, wantErr: `"a=2": a is set twice`},
		{name: "a path through a value", strs: []string{"a=1", "a.b=2"}, wantErr: `"a.b=2": a is a value, not a struct`},
		{name: "an empty key", strs: []string{"a..b=1"}, wantErr: `"a..b=1": empty key in path`},
		{name: "a typed value that is not JSON", typed: []string{"a=tru"}, wantErr: `"a=tru": not JSON`},
		{name: "an object that is not JSON", typed: []string{"{a"}, wantErr: `"{a": not a JSON object`},
		{name: "an object's key set twice", typed: []string{`{"a": 1}`, `{"a": 2}`}, wantErr: `"{\"a\": 2}": a is set twice`},
		{name: "a path an object set", strs: []string{"a=1"}, typed: []string{`{"a": 1}`}, wantErr: `"a=1": a is set twice`},
		{name: "no path", strs: []string{"=1"}, wantErr: `"=1": want path=value`},
		{name: "no value", typed: []string{"a"}, wantErr: `"a": want path=JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeMetadata(tt.strs, tt.typed)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := structpb.NewStruct(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("NodeMetadata (-want +got):\n%s", diff)
			}
		})
	}
}
