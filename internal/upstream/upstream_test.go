package upstream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-relay/xds-relay/internal/cache"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoff(t *testing.T) {
	b := newBackoff(Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2})
	base := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, ms := range base {
		want := ms * time.Millisecond
		got := b.wait()
		lo, hi := time.Duration(float64(want)*0.8), time.Duration(float64(want)*1.2)
		if got < lo || got > hi {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, got, lo, hi)
		}
	}
	b.reset()
	if got := b.wait(); got > 120*time.Millisecond {
		t.Errorf("after reset: %v, want about 100ms", got)
	}
}

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDeltaUpdateValidation(t *testing.T) {
	c1 := anyOf(t, &clusterv3.Cluster{Name: "c1"})
	for _, tc := range []struct {
		name    string
		res     []*discoveryv3.Resource
		removed []string
		wantErr string // substring; "" accepts
		wantN   int
	}{
		{name: "good", res: []*discoveryv3.Resource{{Name: "c1", Version: "1", Resource: c1}}, wantN: 1},
		{name: "heartbeat", res: []*discoveryv3.Resource{{Name: "c1", Version: "1", Ttl: durationpb.New(time.Second)}}, wantN: 1},
		{name: "duplicate name", res: []*discoveryv3.Resource{{Name: "c1", Resource: c1}, {Name: "c1", Resource: c1}}, wantErr: `"c1" appears more than once`},
		{name: "two spellings of one urn", res: []*discoveryv3.Resource{
			{Name: "xdstp://a/envoy.config.cluster.v3.Cluster/x?a=1&b=2", Resource: c1},
			{Name: "xdstp://a/envoy.config.cluster.v3.Cluster/x?b=2&a=1", Resource: c1},
		}, wantErr: "are the same resource"},
		{name: "wrong type", res: []*discoveryv3.Resource{{Name: "l", Resource: &anypb.Any{TypeUrl: resource.ListenerType}}}, wantErr: "has type type.googleapis.com/envoy.config.listener.v3.Listener"},
		{name: "undecodable", res: []*discoveryv3.Resource{{Name: "c9", Resource: &anypb.Any{TypeUrl: resource.ClusterType, Value: []byte{0xff, 0xff}}}}, wantErr: `"c9" cannot be decoded`},
		{name: "no name", res: []*discoveryv3.Resource{{Resource: c1}}, wantErr: "has no name"},
		{name: "bad removed name", removed: []string{"xdstp://"}, wantErr: "removed resource name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := deltaUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DeltaDiscoveryResponse{
				TypeUrl: resource.ClusterType, Resources: tc.res, RemovedResources: tc.removed,
			}, time.Now())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if len(u.Resources) != tc.wantN {
					t.Errorf("%d resources, want %d", len(u.Resources), tc.wantN)
				}
				return
			}
			if err == nil || !errors.Is(err, errRejected) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestSotwUpdateValidation(t *testing.T) {
	c1 := anyOf(t, &clusterv3.Cluster{Name: "c1"})
	wrapped := anyOf(t, &discoveryv3.Resource{Name: "c1", Resource: c1, Ttl: durationpb.New(time.Second)})
	hb := anyOf(t, &discoveryv3.Resource{Name: "c1", Ttl: durationpb.New(time.Second)})
	for _, tc := range []struct {
		name     string
		res      []*anypb.Any
		wantErr  string
		wantBody []*anypb.Any // nil entry: heartbeat
	}{
		{name: "plain", res: []*anypb.Any{c1}, wantBody: []*anypb.Any{c1}},
		{name: "ttl wrapper unwrapped", res: []*anypb.Any{wrapped}, wantBody: []*anypb.Any{c1}},
		{name: "heartbeat", res: []*anypb.Any{hb}, wantBody: []*anypb.Any{nil}},
		{name: "duplicate", res: []*anypb.Any{c1, wrapped}, wantErr: `"c1" appears more than once`},
		{name: "wrong type", res: []*anypb.Any{{TypeUrl: resource.ListenerType}}, wantErr: "response type_url is"},
		{name: "undecodable", res: []*anypb.Any{{TypeUrl: resource.ClusterType, Value: []byte{0xff}}}, wantErr: "cannot be decoded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := sotwUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DiscoveryResponse{
				TypeUrl: resource.ClusterType, VersionInfo: "v1", Resources: tc.res,
			}, time.Now())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Resources) != len(tc.wantBody) {
				t.Fatalf("%d resources, want %d", len(u.Resources), len(tc.wantBody))
			}
			for i, r := range u.Resources {
				if r.Name != "c1" || r.OriginVersion != "v1" {
					t.Errorf("resource %d: name %q origin version %q", i, r.Name, r.OriginVersion)
				}
				if tc.wantBody[i] == nil {
					if !r.Heartbeat {
						t.Errorf("resource %d: want heartbeat", i)
					}
					continue
				}
				if !proto.Equal(tc.wantBody[i], r.Body) {
					t.Errorf("resource %d: body %v, want %v", i, r.Body, tc.wantBody[i])
				}
			}
		})
	}
}

// A type the relay cannot decode reaches it over SotW named only by the
// Resource wrapper; bare, it is NACKed with a reason saying so.
func TestSotwUpdateCustomType(t *testing.T) {
	const custom = "type.googleapis.com/mesh.example.v1.Workload"
	body := &anypb.Any{TypeUrl: custom, Value: []byte("opaque")}
	for _, tc := range []struct {
		name    string
		res     *anypb.Any
		wantErr string
	}{
		{name: "wrapped", res: anyOf(t, &discoveryv3.Resource{Name: "w1", Resource: body})},
		{name: "bare", res: body, wantErr: "its name must come in the Resource wrapper"},
		{name: "wrapped, another type", res: anyOf(t, &discoveryv3.Resource{Name: "w1", Resource: &anypb.Any{TypeUrl: resource.ClusterType}}), wantErr: "response type_url is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := sotwUpdate(cache.LinkID{Authority: "a"}, &discoveryv3.DiscoveryResponse{
				TypeUrl: custom, VersionInfo: "v1", Resources: []*anypb.Any{tc.res},
			}, time.Now())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Resources) != 1 || u.Resources[0].Name != "w1" || !proto.Equal(u.Resources[0].Body, body) {
				t.Fatalf("resources %v, want w1 with the opaque body", u.Resources)
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		content   string
		wantNames []string
		wantErr   string
	}{
		{
			name:      "typed resource yaml",
			content:   "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c1\nconnect_timeout: 1s\n",
			wantNames: []string{"c1"},
		},
		{
			name:      "typed resource json",
			content:   `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c2"}`,
			wantNames: []string{"c2"},
		},
		{
			name: "discovery response",
			content: `version_info: "1"
type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: a
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: b
`,
			wantNames: []string{"a", "b"},
		},
		{name: "not yaml", content: "{{{", wantErr: "not YAML"},
		{name: "unknown field", content: "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c1\nbogus: 1\n",
			wantErr: `line 3: resource: proto: unknown field "bogus"`},
		{
			// The YAML line, not the JSON position the relay made of it.
			name: "bad value deep in a discovery response",
			content: `version_info: "1"
type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: a
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: b
  load_assignment:
    cluster_name: b
    endpoints:
    - lb_endpoints:
      - endpoint:
          address:
            socket_address: {address: 10.0.0.1, port_value: "not a port"}
`,
			wantErr: "line 14: neither a resource",
		},
		{name: "json file", content: "{\"@type\": \"type.googleapis.com/envoy.config.cluster.v3.Cluster\",\n \"name\": \"c\",\n \"nope\": 1}",
			wantErr: `line 3: resource: proto: unknown field "nope"`},
		{name: "no name", content: "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n", wantErr: "has no name"},
		{name: "neither", content: "foo: bar\n", wantErr: "neither a resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := parseFile([]byte(tc.content), time.Now())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.res.Name)
				if r.typeURL != resource.ClusterType || len(r.res.Body.GetValue()) == 0 {
					t.Errorf("%s: type %s, %d bytes", r.res.Name, r.typeURL, len(r.res.Body.GetValue()))
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("names %v, want %v", got, tc.wantNames)
			}
		})
	}
}

// New takes its numbers from the caller (the relay: config), never its own
// defaults: a missing or out-of-range one is an error naming the field.
func TestNewValidatesOptions(t *testing.T) {
	c := cache.New(cache.Options{})
	t.Cleanup(c.Close)
	valid := func() Options {
		return Options{
			Backoff:          Backoff{Initial: time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0},
			ConnectTimeout:   time.Second,
			FailbackInterval: time.Minute,
			MaxRequestSize:   1 << 20,
			IdleTimeout:      time.Minute,
			ResponseTimeout:  time.Second,
			Cache:            c,
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   []string // substrings of the error; none: valid
	}{
		{name: "valid, no jitter", change: func(*Options) {}},
		{name: "zero", change: func(o *Options) { *o = Options{} }, want: []string{
			"Options.Cache is required", "Backoff.Initial", "Backoff.Max", "Backoff.Multiplier", "ConnectTimeout", "FailbackInterval", "MaxRequestSize", "IdleTimeout", "ResponseTimeout",
		}},
		{name: "max below initial", change: func(o *Options) { o.Backoff.Max = o.Backoff.Initial / 2 }, want: []string{"Backoff.Max"}},
		{name: "jitter above 1", change: func(o *Options) { o.Backoff.Jitter = 1.5 }, want: []string{"Backoff.Jitter"}},
		{name: "negative failback", change: func(o *Options) { o.FailbackInterval = -time.Second }, want: []string{"FailbackInterval"}},
		{name: "credentials that cannot key a connection", change: func(o *Options) {
			o.Authorities = []Authority{{Name: "a", Origins: []string{"h:1"}, Credentials: unkeyableCreds{}}}
		}, want: []string{"Authorities[0].Credentials", "pass a pointer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.change(&o)
			m, err := New(o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				m.Close()
				return
			}
			if err == nil {
				m.Close()
				t.Fatalf("New accepted %+v", o)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if !errors.Is(err, ErrBadOptions) && !errors.Is(err, ErrNoCache) {
				t.Errorf("error %q wraps neither ErrBadOptions nor ErrNoCache", err)
			}
		})
	}
}

// unkeyableCreds is a credentials value that is not comparable, so it
// cannot key a shared connection (New refuses it).
type unkeyableCreds struct {
	credentials.TransportCredentials
	_ []int
}

// The NACK of refused resources names each with its error, within its
// bound.
func TestRefusalMessage(t *testing.T) {
	one := refusalMessage(resource.EndpointType, []cache.Refusal{{Name: "cla-0", Err: errors.New("invalid SocketAddress.PortValue: value must be less than or equal to 65535")}})
	want := `1 resource(s) of type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment refused by the relay (delivery.validate), the rest of the response applied; resource "cla-0": invalid SocketAddress.PortValue: value must be less than or equal to 65535`
	if one != want {
		t.Errorf("message = %q\nwant %q", one, want)
	}
	var many []cache.Refusal
	for i := range 1000 {
		many = append(many, cache.Refusal{Name: fmt.Sprintf("cla-%d", i), Err: errors.New("invalid ClusterLoadAssignment.ClusterName: value length must be at least 1 runes")})
	}
	got := refusalMessage(resource.EndpointType, many)
	if len(got) > maxRefusalDetail+32 || !strings.Contains(got, "more") {
		t.Errorf("message of 1000 refusals is %d bytes, ends %q: want at most %d and the rest counted", len(got), got[len(got)-40:], maxRefusalDetail)
	}
}
