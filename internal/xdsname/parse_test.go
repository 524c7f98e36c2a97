package xdsname

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const lds = "envoy.config.listener.v3.Listener"

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Name
	}{
		{
			name: "plain URN",
			in:   "xdstp://auth/" + lds + "/foo",
			want: Name{Authority: "auth", Type: lds, ID: "foo"},
		},
		{
			name: "empty authority",
			in:   "xdstp:///" + lds + "/foo",
			want: Name{Type: lds, ID: "foo"},
		},
		{
			name: "id path kept whole",
			in:   "xdstp://auth/" + lds + "/a/b/c",
			want: Name{Authority: "auth", Type: lds, ID: "a/b/c"},
		},
		{
			name: "params sorted by key",
			in:   "xdstp://auth/" + lds + "/foo?shard_id=1234&direction=inbound",
			want: Name{Authority: "auth", Type: lds, ID: "foo", Params: []Param{{"direction", "inbound"}, {"shard_id", "1234"}}},
		},
		{
			name: "escapes decoded everywhere",
			in:   "xdstp://au%C3%A9/" + lds + "/a%20b%2Fc?k%3D=v%26w",
			want: Name{Authority: "au\u00e9", Type: lds, ID: "a b/c", Params: []Param{{"k=", "v&w"}}},
		},
		{
			name: "plus is a space in the query only",
			in:   "xdstp://auth/" + lds + "/a+b?k=a+b",
			want: Name{Authority: "auth", Type: lds, ID: "a+b", Params: []Param{{"k", "a b"}}},
		},
		{
			name: "lower-case escapes",
			in:   "xdstp://auth/" + lds + "/%2a%2fx",
			want: Name{Authority: "auth", Type: lds, ID: "*/x"},
		},
		{
			name: "missing = is an empty value, empty pairs skipped",
			in:   "xdstp://auth/" + lds + "/foo?&k&&j=",
			want: Name{Authority: "auth", Type: lds, ID: "foo", Params: []Param{{"j", ""}, {"k", ""}}},
		},
		{
			name: "bare question mark",
			in:   "xdstp://auth/" + lds + "/foo?",
			want: Name{Authority: "auth", Type: lds, ID: "foo"},
		},
		{
			name: "glob",
			in:   "xdstp://auth/" + lds + "/dir/*?node_type=ingress",
			want: Name{Authority: "auth", Type: lds, ID: "dir/*", Params: []Param{{"node_type", "ingress"}}},
		},
		{
			name: "glob of the whole type",
			in:   "xdstp://auth/" + lds + "/*",
			want: Name{Authority: "auth", Type: lds, ID: "*"},
		},
		{
			name: "escaped star is a literal, not a glob",
			in:   "xdstp://auth/" + lds + "/dir/%2A",
			want: Name{Authority: "auth", Type: lds, ID: "dir/*", LiteralStar: true},
		},
		{
			name: "escaped slash before star is a literal",
			in:   "xdstp://auth/" + lds + "/dir%2F*",
			want: Name{Authority: "auth", Type: lds, ID: "dir/*", LiteralStar: true},
		},
		{
			name: "star inside a segment is a literal",
			in:   "xdstp://auth/" + lds + "/a*b/c*",
			want: Name{Authority: "auth", Type: lds, ID: "a*b/c*"},
		},
		{
			name: "escaped slash in type splits like grpc-go",
			in:   "xdstp://auth/T%2Fx/y",
			want: Name{Authority: "auth", Type: "T", ID: "x/y"},
		},
		{
			name: "authority with port and IPv6 literal",
			in:   "xdstp://[::1]:8080/" + lds + "/foo",
			want: Name{Authority: "[::1]:8080", Type: lds, ID: "foo"},
		},
		{
			name: "entry directive",
			in:   "xdstp://auth/envoy.config.listener.v3.ListenerCollection/foo#entry=bar",
			want: Name{Authority: "auth", Type: "envoy.config.listener.v3.ListenerCollection", ID: "foo", Entry: "bar"},
		},
		{
			name: "alt directive stored canonical",
			in:   "xdstp://cloud/T/foo#alt=xdstp://onprem/T/bar?b=2&a=1",
			want: Name{Authority: "cloud", Type: "T", ID: "foo", Alt: "xdstp://onprem/T/bar?a=1&b=2"},
		},
		{
			name: "both directives, either order",
			in:   "xdstp://a/T/foo#entry=e.1,alt=xdstp://b/T/x%2Cy",
			want: Name{Authority: "a", Type: "T", ID: "foo", Alt: "xdstp://b/T/x,y", Entry: "e.1"},
		},
		{
			name: "dot segments kept",
			in:   "xdstp://a/T/./x/../y",
			want: Name{Authority: "a", Type: "T", ID: "./x/../y"},
		},
		{
			name: "empty id segments kept",
			in:   "xdstp://a/T//x/",
			want: Name{Authority: "a", Type: "T", ID: "/x/"},
		},
		{
			name: "raw space and non-ASCII accepted",
			in:   "xdstp://a/T/my id\u00e9?k=a b",
			want: Name{Authority: "a", Type: "T", ID: "my id\u00e9", Params: []Param{{"k", "a b"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr error
		wantMsg string // the error text must contain this
	}{
		{"legacy name", "listener_0", ErrNotXDSTP, "not an xdstp"},
		{"upper-case scheme is legacy", "XDSTP://a/T/x", ErrNotXDSTP, "not an xdstp"},
		{"bad escape in id", "xdstp://a/T/x%zz", ErrBadEscape, `xdstp name "xdstp://a/T/x%zz": bad escape "%zz" in id`},
		{"truncated escape in id", "xdstp://a/T/x%4", ErrBadEscape, `bad escape "%4" in id`},
		{"bad escape in type", "xdstp://a/T%g0/x", ErrBadEscape, `bad escape "%g0" in type`},
		{"bad escape in authority", "xdstp://a%/T/x", ErrBadEscape, `bad escape "%" in authority`},
		{"bad escape in query", "xdstp://a/T/x?k=%x1", ErrBadEscape, `bad escape "%x1" in context parameters`},
		{"bad character in authority", "xdstp://u@a/T/x", ErrBadAuthority, `invalid character '@' in authority`},
		{"space in authority", "xdstp://a b/T/x", ErrBadAuthority, `invalid character ' ' in authority`},
		{"control character", "xdstp://a/T/x\n", ErrControlChar, `control character '\n' at offset 13`},
		{"DEL", "xdstp://a/T/x\x7f", ErrControlChar, `control character`},
		{"no path", "xdstp://a", ErrNoType, "no type"},
		{"nothing at all", "xdstp://", ErrNoType, "no type"},
		{"query before path", "xdstp://a?k=v", ErrNoType, "no type"},
		{"empty type", "xdstp://a//x", ErrNoType, "no type"},
		{"no id", "xdstp://a/T", ErrNoID, `no id after type "T"`},
		{"empty id", "xdstp://a/T/", ErrEmptyID, `empty id after type "T"`},
		{"empty id with query", "xdstp://a/T/?k=v", ErrEmptyID, "empty id"},
		{"glob in the middle", "xdstp://a/T/dir/*/x", ErrGlobNotLast, `glob "*" not in last path segment`},
		{"glob as type", "xdstp://a/*/x", ErrGlobNotLast, "not in last path segment"},
		{"glob without type", "xdstp://a/*", ErrNoID, "no id"},
		{"repeated param", "xdstp://a/T/x?k=1&j=2&k=3", ErrRepeatedParam, `context parameter "k" repeated`},
		{"repeated param same value", "xdstp://a/T/x?k=1&k=1", ErrRepeatedParam, `context parameter "k" repeated`},
		{"empty key", "xdstp://a/T/x?=v", ErrBadQuery, `malformed query: context parameter "=v" has an empty key`},
		{"empty fragment", "xdstp://a/T/x#", ErrBadDirective, `processing directive "" is not key=value`},
		{"trailing comma", "xdstp://a/T/x#entry=e,", ErrBadDirective, "is not key=value"},
		{"directive without value", "xdstp://a/T/x#entry", ErrBadDirective, `processing directive "entry" is not key=value`},
		{"unknown directive", "xdstp://a/T/x#foo=bar", ErrUnknownDirective, `unknown processing directive "foo"`},
		{"repeated entry", "xdstp://a/T/x#entry=a,entry=b", ErrRepeatedDirective, `processing directive "entry" repeated`},
		{"repeated alt", "xdstp://a/T/x#alt=xdstp://b/T/y,alt=xdstp://c/T/z", ErrRepeatedDirective, `processing directive "alt" repeated`},
		{"bad entry", "xdstp://a/T/x#entry=a%20b", ErrBadEntry, `entry "a%20b": invalid character '%'`},
		{"alt not xdstp", "xdstp://a/T/x#alt=http://b/T/y", ErrBadAlt, `bad alt URL: "http://b/T/y" is not an xdstp URL`},
		{"alt malformed", "xdstp://a/T/x#alt=xdstp://b/T", ErrBadAlt, `bad alt URL: xdstp name "xdstp://b/T": no id`},
		{"alt with directives", "xdstp://a/T/x#alt=xdstp://b/T/y#entry=z", ErrBadAlt, "has processing directives of its own"},
		{"unescaped comma in alt", "xdstp://a/T/x#alt=xdstp://b/T/y,z", ErrBadDirective, `processing directive "z" is not key=value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error %v", tc.in, got, tc.wantErr)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Parse(%q) error %v, want errors.Is %v", tc.in, err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Parse(%q) error %q does not mention %q", tc.in, err, tc.wantMsg)
			}
		})
	}
}

func TestParseErrorQuotesLongNamesShort(t *testing.T) {
	in := "xdstp://a/T/" + strings.Repeat("x", 10000) + "%zz"
	_, err := Parse(in)
	if !errors.Is(err, ErrBadEscape) {
		t.Fatalf("Parse(long) error %v, want %v", err, ErrBadEscape)
	}
	if len(err.Error()) > 2*maxQuoted {
		t.Errorf("error text is %d bytes, want at most %d", len(err.Error()), 2*maxQuoted)
	}
}

// nestedAlt is a name with depth alt directives nested in each other, as a
// hostile client might send.
func nestedAlt(depth int) string {
	var b strings.Builder
	for range depth {
		b.WriteString("xdstp://a/envoy.config.listener.v3.Listener/x#alt=")
	}
	b.WriteString("xdstp://a/envoy.config.listener.v3.Listener/x")
	return b.String()
}

// TestParseNestedAltIsLinear: nested alt directives are refused after one
// pass (the work does not grow with the depth) with a short error.
func TestParseNestedAltIsLinear(t *testing.T) {
	allocs := func(name string) float64 {
		return testing.AllocsPerRun(5, func() { _, _ = Parse(name) })
	}
	shallow, deep := nestedAlt(3), nestedAlt(5000) // ~250 KB
	_, err := Parse(deep)
	if !errors.Is(err, ErrBadAlt) {
		t.Fatalf("Parse(nested alt): %v, want ErrBadAlt", err)
	}
	if n := len(err.Error()); n > 1024 {
		t.Errorf("error message is %d bytes, want at most 1 KiB", n)
	}
	// Before the fix: 12 against 25002. A few allocations of slack: the
	// runtime may allocate now and then on its own.
	if a, b := allocs(shallow), allocs(deep); b > a+4 {
		t.Errorf("allocations: %v at depth 3, %v at depth 5000: the work grows with the depth", a, b)
	}
}

func TestAuthorityOf(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		err            error
	}{
		{"plain", "xdstp://auth.example/envoy.config.cluster.v3.Cluster/c1", "auth.example", nil},
		{"empty authority", "xdstp:///T/x", "", nil},
		{"escaped", "xdstp://a%C3%A9/T/x", "a\u00e9", nil},
		{"query before slash", "xdstp://a?x=1/T/x", "", ErrNoType},
		{"no type", "xdstp://a", "", ErrNoType},
		{"bad escape", "xdstp://a%zz/T/x", "", ErrBadEscape},
		{"bad character", "xdstp://a b/T/x", "", ErrBadAuthority},
		{"legacy", "cluster-1", "", ErrNotXDSTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AuthorityOf(tc.in)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Errorf("AuthorityOf(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = AuthorityOf("xdstp://auth.example/T/x") }); n != 0 {
		t.Errorf("AuthorityOf allocates %v times, want 0", n)
	}
}
