package loadgen

import (
	"errors"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Target: "127.0.0.1:1", Clients: 1, Names: []string{"a"}}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // fields named in the error, in order
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "valid glob", mutate: func(c *Config) { c.Names = nil; c.Glob = "xdstp://a/t/d/*" }},
		{name: "bad target", mutate: func(c *Config) { c.Target = "nohost" }, want: []string{"target"}},
		{name: "no clients", mutate: func(c *Config) { c.Clients = 0 }, want: []string{"clients"}},
		{name: "bad variant", mutate: func(c *Config) { c.Variant = "rest" }, want: []string{"variant"}},
		{name: "bad type", mutate: func(c *Config) { c.TypeURL = "xds" }, want: []string{"type"}},
		{name: "nothing to subscribe", mutate: func(c *Config) { c.Names = nil }, want: []string{"names"}},
		{name: "wildcard cds, no names", mutate: func(c *Config) { c.Names = nil; c.TypeURL = "cds" }},
		{name: "wildcard lds, no names", mutate: func(c *Config) { c.Names = nil; c.TypeURL = resourcev3.ListenerType }},
		{name: "explicit wildcard", mutate: func(c *Config) { c.Names = []string{"*"} }},
		{name: "window without names", mutate: func(c *Config) { c.Names = nil; c.TypeURL = "cds"; c.Window = 2 }, want: []string{"window"}},
		{name: "envoy", mutate: func(c *Config) { c.Names = nil; c.Envoy = true }},
		{name: "envoy with a type and names", mutate: func(c *Config) { c.Envoy = true; c.TypeURL = "cds" }, want: []string{"type", "names"}},
		{name: "names and glob", mutate: func(c *Config) { c.Glob = "xdstp://a/t/d/*" }, want: []string{"names"}},
		{name: "empty name", mutate: func(c *Config) { c.Names = []string{"a", ""} }, want: []string{"names[1]"}},
		{name: "glob without star", mutate: func(c *Config) { c.Names = nil; c.Glob = "xdstp://a/t/d" }, want: []string{"glob"}},
		{name: "nack fraction", mutate: func(c *Config) { c.NackFraction = 1.5 }, want: []string{"nack-fraction"}},
		{name: "every problem at once", mutate: func(c *Config) { c.Target = ""; c.Clients = -1; c.NackFraction = -1 },
			want: []string{"target", "clients", "nack-fraction"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			err := c.Validate()
			var got []string
			if err != nil {
				if !errors.Is(err, ErrConfig) {
					t.Errorf("error %v does not wrap ErrConfig", err)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					field, _, _ := strings.Cut(strings.TrimPrefix(line, ErrConfig.Error()+": "), ":")
					got = append(got, field)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fields with problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{Target: "h:1", Clients: 250, Names: []string{"a"}, TypeURL: "cds"}.withDefaults()
	type defaults struct {
		Conns   int
		Variant Variant
		TypeURL string
		Cluster string
	}
	want := defaults{Conns: 3, Variant: Delta, TypeURL: resourcev3.ClusterType, Cluster: "loadgen"}
	if diff := cmp.Diff(want, defaults{got.Conns, got.Variant, got.TypeURL, got.NodeCluster}); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestParseStamp(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	tests := []struct {
		name   string
		body   []byte
		want   time.Time
		wantOK bool
	}{
		{name: "embedded", body: []byte("\x0a\x03abc" + Stamp(at) + "tail"), want: at, wantOK: true},
		{name: "absent", body: []byte("no stamp here")},
		{name: "unterminated", body: []byte(StampMarker + "123")},
		{name: "not a number", body: []byte(StampMarker + "12x;")},
		{name: "empty", body: []byte(StampMarker + ";")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseStamp(tc.body)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("ParseStamp = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestSotwResourceName(t *testing.T) {
	body, err := proto.Marshal(cla("xdstp://a/t/n", time.Time{}))
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := anypb.New(&endpointv3.ClusterLoadAssignment{ClusterName: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      *anypb.Any
		want    string
		wantErr bool
	}{
		{name: "cluster load assignment", in: &anypb.Any{TypeUrl: resourcev3.EndpointType, Value: body}, want: "xdstp://a/t/n"},
		{name: "via anypb", in: wrapped, want: "plain"},
		{name: "no name", in: &anypb.Any{TypeUrl: resourcev3.EndpointType}, wantErr: true},
		{name: "garbage", in: &anypb.Any{TypeUrl: resourcev3.EndpointType, Value: []byte{0xff, 0xff}}, wantErr: true},
		{name: "bad wrapper", in: &anypb.Any{TypeUrl: xdstype.ResourceWrapperURL, Value: []byte{0xff}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := sotwResource(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("sotwResource = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
