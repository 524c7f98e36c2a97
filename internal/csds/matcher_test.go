package csds

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func idMatcher(sm *matcherv3.StringMatcher) *matcherv3.NodeMatcher {
	return &matcherv3.NodeMatcher{NodeId: sm}
}

func mdMatcher(v *matcherv3.ValueMatcher, keys ...string) *matcherv3.NodeMatcher {
	var path []*matcherv3.StructMatcher_PathSegment
	for _, k := range keys {
		path = append(path, &matcherv3.StructMatcher_PathSegment{Segment: &matcherv3.StructMatcher_PathSegment_Key{Key: k}})
	}
	return &matcherv3.NodeMatcher{NodeMetadatas: []*matcherv3.StructMatcher{{Path: path, Value: v}}}
}

func strVal(sm *matcherv3.StringMatcher) *matcherv3.ValueMatcher {
	return &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: sm}}
}

func TestSelector(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{
		"zone": "eu-west-1a",
		"app":  map[string]any{"tier": "gold", "canary": true, "weight": 7.0, "tags": []any{"a", "b"}, "none": nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "envoy-Front-7", Cluster: "edge", Metadata: md}
	tests := []struct {
		name string
		req  *statusv3.ClientStatusRequest
		want bool
	}{
		{"no matcher selects all", &statusv3.ClientStatusRequest{}, true},
		{"exact", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(exact("envoy-Front-7"))}}, true},
		{"exact other", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(exact("envoy-front-7"))}}, false},
		{"exact ignore_case", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "ENVOY-front-7"}, IgnoreCase: true})}}, true},
		{"prefix", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "envoy-"}})}}, true},
		{"prefix ignore_case", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "ENVOY-front"}, IgnoreCase: true})}}, true},
		{"suffix", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "-8"}})}}, false},
		{"contains", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "Front"}})}}, true},
		{"regex is a full match", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "Front"}}})}}, false},
		{"regex", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `envoy-\w+-[0-9]+`}}})}}, true},
		{"matchers are ORed", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(exact("x")), idMatcher(exact("envoy-Front-7"))}}, true},
		{"node id filter", &statusv3.ClientStatusRequest{Node: &corev3.Node{Id: "other"}}, false},
		{"node id and cluster filter", &statusv3.ClientStatusRequest{Node: &corev3.Node{Id: "envoy-Front-7", Cluster: "edge"}}, true},
		{"node filter and matchers both hold", &statusv3.ClientStatusRequest{Node: &corev3.Node{Cluster: "core"},
			NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(exact("envoy-Front-7"))}}, false},
		{"metadata string", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(strVal(exact("gold")), "app", "tier")}}, true},
		{"metadata top level", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(strVal(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "eu-"}}), "zone")}}, true},
		{"metadata missing path", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true}}, "app", "nope")}}, false},
		{"metadata present", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true}}, "app", "tier")}}, true},
		{"metadata bool", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}}, "app", "canary")}}, true},
		{"metadata null", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_NullMatch_{NullMatch: &matcherv3.ValueMatcher_NullMatch{}}}, "app", "none")}}, true},
		{"metadata double range is half open", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_DoubleMatch{DoubleMatch: &matcherv3.DoubleMatcher{
				MatchPattern: &matcherv3.DoubleMatcher_Range{Range: &typev3.DoubleRange{Start: 1, End: 7}}}}}, "app", "weight")}}, false},
		{"metadata list", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{
				MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: strVal(exact("b"))}}}}, "app", "tags")}}, true},
		{"metadata or", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{ValueMatchers: []*matcherv3.ValueMatcher{
				strVal(exact("silver")), strVal(exact("gold"))}}}}, "app", "tier")}}, true},
		{"metadata through a string is no path", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true}}, "zone", "x")}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := compileRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := sel(node); got != tt.want {
				t.Errorf("selects %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectorErrors(t *testing.T) {
	many := make([]*matcherv3.NodeMatcher, MaxNodeMatchers+1)
	for i := range many {
		many[i] = idMatcher(exact("x"))
	}
	tests := []struct {
		name string
		req  *statusv3.ClientStatusRequest
		want string
	}{
		{"no pattern", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{})}},
			"node_matchers[0].node_id: no match pattern set"},
		{"bad regex", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(exact("a")), idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}})}},
			"node_matchers[1].node_id: safe_regex"},
		{"custom", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{idMatcher(&matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Custom{}})}}, "custom: extension matchers are not supported"},
		{"empty path", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(strVal(exact("a")))}},
			"node_matchers[0].node_metadatas[0].path: empty"},
		{"value without pattern", &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{mdMatcher(&matcherv3.ValueMatcher{}, "a")}},
			"node_metadatas[0].value.no match pattern set"},
		{"too many", &statusv3.ClientStatusRequest{NodeMatchers: many}, "node_matchers: 65, at most 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compileRequest(tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
