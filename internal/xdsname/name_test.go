package xdsname

import (
	"errors"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCanonical checks canonical strings. Where grpc-go handles the name,
// want is exactly what grpc-go's xDS client sends (grpcgo marks those cases
// and the test cross-checks them against a net/url model of grpc-go).
func TestCanonical(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		grpcgo bool // grpc-go canonicalises in to the same string
	}{
		{"already canonical", "xdstp://auth/" + lds + "/foo", "xdstp://auth/" + lds + "/foo", true},
		{"empty authority", "xdstp:///" + lds + "/foo", "xdstp:///" + lds + "/foo", true},
		{"param order", "xdstp://auth/T/foo?shard_id=1234&direction=inbound", "xdstp://auth/T/foo?direction=inbound&shard_id=1234", true},
		{"three params reversed", "xdstp://a/T/x?c=3&b=2&a=1", "xdstp://a/T/x?a=1&b=2&c=3", true},
		{"unreserved escapes decoded", "xdstp://a/T/%66%6F%6f-%7E?k%5F=v%2E", "xdstp://a/T/foo-~?k_=v.", true},
		{"literal star in id", "xdstp://a/T/a*b", "xdstp://a/T/a%2Ab", true},
		{"escaped star stays a literal", "xdstp://a/T/dir/%2A", "xdstp://a/T/dir/%2A", true},
		{"lower-case escape upper-cased", "xdstp://a/T/dir/%2a", "xdstp://a/T/dir/%2A", true},
		{"star not last segment literal", "xdstp://a/T/%2A/x", "xdstp://a/T/%2A/x", true},
		{"space in id", "xdstp://a/T/a b", "xdstp://a/T/a%20b", true},
		{"path sub-delims kept", "xdstp://a/T/$&+,:;=@x", "xdstp://a/T/$&+,:;=@x", true},
		{"path escapes quotes and parens", "xdstp://a/T/'(!)", "xdstp://a/T/%27%28%21%29", true},
		{"escaped slash decoded", "xdstp://a/T/a%2Fb", "xdstp://a/T/a/b", true},
		{"non-ASCII id", "xdstp://a/T/caf\u00e9", "xdstp://a/T/caf%C3%A9", true},
		{"non-ASCII authority", "xdstp://caf\u00e9/T/x", "xdstp://caf%C3%A9/T/x", true},
		{"authority port", "xdstp://host:443/T/x", "xdstp://host:443/T/x", true},
		{"plus in query is space", "xdstp://a/T/x?k=a+b", "xdstp://a/T/x?k=a b", true},
		{"escaped space in query", "xdstp://a/T/x?k=a%20b", "xdstp://a/T/x?k=a b", true},
		{"equals in value", "xdstp://a/T/x?k=a=b", "xdstp://a/T/x?k=a=b", true},
		{"slash and question in value", "xdstp://a/T/x?k=a/b?c", "xdstp://a/T/x?k=a/b?c", true},
		{"missing value", "xdstp://a/T/x?k", "xdstp://a/T/x?k=", true},
		{"empty query dropped", "xdstp://a/T/x?", "xdstp://a/T/x", true},
		{"empty pairs dropped", "xdstp://a/T/x?&b=2&&a=1&", "xdstp://a/T/x?a=1&b=2", true},
		{"non-ASCII value raw", "xdstp://a/T/x?k=%C3%A9", "xdstp://a/T/x?k=\u00e9", true},
		{"xds context params", "xdstp://a/some.type/foo?xds.resource.vip=96.54.3.1&bar=baz", "xdstp://a/some.type/foo?bar=baz&xds.resource.vip=96.54.3.1", true},
		// grpc-go writes these decoded bytes raw and then reads back a
		// different name; we escape them.
		{"ampersand in value", "xdstp://a/T/x?k=a%26b", "xdstp://a/T/x?k=a%26b", false},
		{"plus in value", "xdstp://a/T/x?k=a%2Bb", "xdstp://a/T/x?k=a%2Bb", false},
		{"percent in value", "xdstp://a/T/x?k=100%25", "xdstp://a/T/x?k=100%25", false},
		{"hash in value", "xdstp://a/T/x?k=%23", "xdstp://a/T/x?k=%23", false},
		{"semicolon in value", "xdstp://a/T/x?k=a;b", "xdstp://a/T/x?k=a%3Bb", false},
		{"equals in key", "xdstp://a/T/x?k%3D=v", "xdstp://a/T/x?k%3D=v", false},
		{"control char in value", "xdstp://a/T/x?k=%0A", "xdstp://a/T/x?k=%0A", false},
		// Globs: grpc-go would send "%2A"; a glob keeps its bare star.
		{"glob", "xdstp://a/T/dir/*?b=2&a=1", "xdstp://a/T/dir/*?a=1&b=2", false},
		{"glob of whole type", "xdstp://a/T/*", "xdstp://a/T/*", false},
		{"glob with literal star before", "xdstp://a/T/a*/*", "xdstp://a/T/a%2A/*", false},
		// Directives: grpc-go drops the fragment.
		{"directives in fixed order", "xdstp://a/T/x#entry=e,alt=xdstp://b/T/y?d=1&c=2", "xdstp://a/T/x#alt=xdstp://b/T/y?c=2&d=1,entry=e", false},
		{"comma in alt escaped", "xdstp://a/T/x#alt=xdstp://b/T/y%2Cz", "xdstp://a/T/x#alt=xdstp://b/T/y%2Cz", false},
		{"alt decoded and re-encoded", "xdstp://a/T/x#alt=xdstp://b/T/%79", "xdstp://a/T/x#alt=xdstp://b/T/y", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(tc.in)
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Canonical(%q) (-want +got):\n%s", tc.in, diff)
			}
			n, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, n.String()); diff != "" {
				t.Errorf("Parse(%q).String() (-want +got):\n%s", tc.in, diff)
			}
			grpcOut, handled := grpcHandles(tc.in)
			if tc.grpcgo {
				if !handled {
					t.Fatalf("grpc-go model does not handle %q", tc.in)
				}
				if diff := cmp.Diff(grpcOut, got); diff != "" {
					t.Errorf("Canonical(%q) differs from grpc-go (-grpc-go +got):\n%s", tc.in, diff)
				}
			} else if handled && grpcOut == got {
				t.Errorf("case marked not grpc-go but grpc-go agrees on %q; mark it grpcgo", tc.in)
			}
		})
	}
}

func TestCanonicalLegacy(t *testing.T) {
	tests := []struct{ name, in string }{
		{"plain", "listener_0"},
		{"empty", ""},
		{"wildcard", "*"},
		{"looks like a URL", "http://a/T/x?b=1&a=2"},
		{"upper-case scheme", "XDSTP://a/T/x"},
		{"missing slash", "xdstp:/a/T/x"},
		{"bytes that xdstp would reject", "a%zz\n b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(tc.in)
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.in, got); diff != "" {
				t.Errorf("Canonical(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestCanonicalError(t *testing.T) {
	if got, err := Canonical("xdstp://a/T/x%zz"); err == nil {
		t.Errorf("Canonical(bad escape) = %q, want error", got)
	}
}

func TestEquivalentSpellings(t *testing.T) {
	tests := []struct {
		name string
		a, b string
	}{
		{"param order", "xdstp://a/T/x?a=1&b=2", "xdstp://a/T/x?b=2&a=1"},
		{"escaped unreserved", "xdstp://a/T/foo", "xdstp://a/T/%66oo"},
		{"plus versus %20", "xdstp://a/T/x?k=a+b", "xdstp://a/T/x?k=a%20b"},
		{"hex case", "xdstp://a/T/a%2ab", "xdstp://a/T/a%2Ab"},
		{"literal star raw or escaped", "xdstp://a/T/a*b", "xdstp://a/T/a%2Ab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ca, errA := Canonical(tc.a)
			cb, errB := Canonical(tc.b)
			if errA != nil || errB != nil {
				t.Fatalf("Canonical: %v, %v", errA, errB)
			}
			if ca != cb {
				t.Errorf("Canonical(%q) = %q, Canonical(%q) = %q; want equal", tc.a, ca, tc.b, cb)
			}
		})
	}
}

func TestDistinctNames(t *testing.T) {
	tests := []struct {
		name string
		a, b string
	}{
		{"glob versus literal star", "xdstp://a/T/dir/*", "xdstp://a/T/dir/%2A"},
		{"param value", "xdstp://a/T/x?k=1", "xdstp://a/T/x?k=2"},
		{"plus versus escaped plus", "xdstp://a/T/x?k=a+b", "xdstp://a/T/x?k=a%2Bb"},
		{"authority", "xdstp://a/T/x", "xdstp://b/T/x"},
		{"empty authority", "xdstp:///T/x", "xdstp://a/T/x"},
		{"trailing slash", "xdstp://a/T/x", "xdstp://a/T/x/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ca, errA := Canonical(tc.a)
			cb, errB := Canonical(tc.b)
			if errA != nil || errB != nil {
				t.Fatalf("Canonical: %v, %v", errA, errB)
			}
			if ca == cb {
				t.Errorf("Canonical(%q) = Canonical(%q) = %q; want different", tc.a, tc.b, ca)
			}
		})
	}
}

// TestEscapeTablesMatchNetURL checks, for every byte, that authority and
// path escaping agree with net/url (which grpc-go uses to build names).
func TestEscapeTablesMatchNetURL(t *testing.T) {
	for c := range 256 {
		s := string([]byte{byte(c)})
		host := (&url.URL{Scheme: "x", Host: "h" + s}).String()[len("x://"):]
		if got := string(appendEscaped([]byte("h"), s, hostSafe)); got != host {
			t.Errorf("authority byte %#x: got %q, net/url %q", c, got, host)
		}
		path := (&url.URL{Path: "/p" + s}).EscapedPath()
		if got := string(appendEscaped([]byte("/p"), s, pathSafe)); got != path {
			t.Errorf("path byte %#x: got %q, net/url %q", c, got, path)
		}
	}
}

// TestStricterThanGRPCGo lists the names grpc-go's parser accepts that
// Parse deliberately rejects: each would be a different or ambiguous
// resource if accepted.
func TestStricterThanGRPCGo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"empty type", "xdstp://a//x", ErrNoType},
		{"empty key", "xdstp://a/T/x?=v", ErrBadQuery},
		{"repeated key (grpc-go keeps the first)", "xdstp://a/T/x?k=1&k=2", ErrRepeatedParam},
		{"userinfo (grpc-go drops it)", "xdstp://user@a/T/x", ErrBadAuthority},
		{"glob segment in the middle", "xdstp://a/T/d/*/x", ErrGlobNotLast},
		{"unknown directive (grpc-go drops the fragment)", "xdstp://a/T/x#foo=bar", ErrUnknownDirective},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := grpcParse(tc.in); !ok {
				t.Fatalf("grpc-go model rejects %q too; case is not stricter", tc.in)
			}
			if _, err := Parse(tc.in); !errors.Is(err, tc.wantErr) {
				t.Errorf("Parse(%q) error %v, want %v", tc.in, err, tc.wantErr)
			}
		})
	}
}
