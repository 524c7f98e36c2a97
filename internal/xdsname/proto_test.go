package xdsname

import (
	"errors"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestResourceNameRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *xdscorev3.ResourceName
	}{
		{"no params", "xdstp://auth/envoy.config.cluster.v3.Cluster/a/b",
			&xdscorev3.ResourceName{Authority: "auth", ResourceType: "envoy.config.cluster.v3.Cluster", Id: "a/b"}},
		{"params in any order", "xdstp://auth/T/foo?b=2&a=1",
			&xdscorev3.ResourceName{Authority: "auth", ResourceType: "T", Id: "foo",
				Context: &xdscorev3.ContextParams{Params: map[string]string{"a": "1", "b": "2"}}}},
		{"empty authority, escaped id", "xdstp:///T/a%20b",
			&xdscorev3.ResourceName{ResourceType: "T", Id: "a b"}},
		{"literal star", "xdstp://auth/T/dir/%2A",
			&xdscorev3.ResourceName{Authority: "auth", ResourceType: "T", Id: "dir/*"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			rn, err := n.ResourceName()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rn, protocmp.Transform()); d != "" {
				t.Errorf("ResourceName (-want +got):\n%s", d)
			}
			back, err := FromResourceName(rn)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(n, back); d != "" {
				t.Errorf("FromResourceName (-want +got):\n%s", d)
			}
		})
	}
}

func TestResourceNameErrors(t *testing.T) {
	for _, url := range []string{"xdstp://auth/T/dir/*", "xdstp://auth/T/c#entry=x"} {
		n, err := Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.ResourceName(); !errors.Is(err, ErrNotURN) {
			t.Errorf("%s: ResourceName error = %v, want ErrNotURN", url, err)
		}
	}
	bad := []struct {
		name string
		rn   *xdscorev3.ResourceName
		want error
	}{
		{"nil", nil, ErrNoType},
		{"no type", &xdscorev3.ResourceName{Authority: "a", Id: "x"}, ErrNoType},
		{"empty id", &xdscorev3.ResourceName{Authority: "a", ResourceType: "T"}, ErrEmptyID},
		{"empty param key", &xdscorev3.ResourceName{ResourceType: "T", Id: "x",
			Context: &xdscorev3.ContextParams{Params: map[string]string{"": "v"}}}, ErrBadQuery},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FromResourceName(tc.rn); !errors.Is(err, tc.want) {
				t.Errorf("FromResourceName error = %v, want %v", err, tc.want)
			}
		})
	}
}
