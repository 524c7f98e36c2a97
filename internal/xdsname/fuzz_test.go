package xdsname

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics and that the canonical form is
// stable: whatever Parse accepts, it accepts again in canonical form as the
// same Name, String is a fixed point, and Canonical agrees with String. Where
// grpc-go's model handles a name too (a URN without directives), the
// canonical strings are equal.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"xdstp://auth/envoy.config.listener.v3.Listener/foo",
		"xdstp:///envoy.config.cluster.v3.Cluster/c1",
		"xdstp://a/T/dir/*?node_type=ingress",
		"xdstp://a/T/*",
		"xdstp://a/T/dir/%2A",
		"xdstp://a/T/dir%2F*",
		"xdstp://a/T/x?c=3&b=2&a=1",
		"xdstp://a/T/x?k=a+b&j=%26%2B%23&i",
		"xdstp://cloud/T/foo#alt=xdstp://onprem/T/bar?b=2&a=1,entry=e.1",
		"xdstp://a/T/x#alt=xdstp://b/T/y%2Cz",
		"xdstp://[::1]:80/T/caf\u00e9 x",
		"xdstp://a%C3%A9/T%2Fx/y",
		"xdstp://a/T/x%zz",
		"xdstp://a/T/dir/*/x",
		"xdstp://a/T/x?k=1&k=2",
		"xdstp://a/T/x#foo=bar",
		"listener_0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			if IsXDSTP(s) && !strings.HasPrefix(err.Error(), "xdstp name ") {
				t.Fatalf("Parse(%q) error %q does not name the name", s, err)
			}
			return
		}
		if a, err := AuthorityOf(s); err != nil || a != n.Authority {
			t.Fatalf("AuthorityOf(%q) = %q, %v; Parse says %q", s, a, err, n.Authority)
		}
		canon := n.String()
		back, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v; its String %q does not parse: %v", s, n, canon, err)
		}
		if diff := cmp.Diff(n, back); diff != "" {
			t.Fatalf("Parse(%q) then String %q parses differently (-first +second):\n%s", s, canon, diff)
		}
		if again := back.String(); again != canon {
			t.Fatalf("String not a fixed point for %q: %q then %q", s, canon, again)
		}
		if got, err := Canonical(s); err != nil || got != canon {
			t.Fatalf("Canonical(%q) = %q, %v; want %q", s, got, err, canon)
		}
		if n.IsURN() {
			if g := n.GlobOf(); !g.Matches(n) {
				t.Fatalf("GlobOf(%q) = %q does not match it", s, g)
			}
			if grpcOut, ok := grpcHandles(s); ok && grpcOut != canon {
				t.Fatalf("Canonical(%q) = %q, grpc-go sends %q", s, canon, grpcOut)
			}
		}
	})
}

// FuzzCanonicalMatchesGRPCGo builds names from fuzzed components, so that
// most inputs are well-formed, and checks that wherever grpc-go's model
// handles a URN, the canonical strings are equal.
func FuzzCanonicalMatchesGRPCGo(f *testing.F) {
	f.Add("auth", "envoy.config.listener.v3.Listener", "dir/x", "k", "v", "j", "w")
	f.Add("", "T", "a*b", "shard", "1 2", "xds.node.id", "n%2B1")
	f.Add("caf%C3%A9:80", "T", "%2A", "a", "b=c", "b", "%26")
	f.Add("h", "T", "x/%2F/y", "k;", "v", "q?", "/")
	f.Fuzz(func(t *testing.T, auth, typ, id, k1, v1, k2, v2 string) {
		s := "xdstp://" + auth + "/" + typ + "/" + id + "?" + k1 + "=" + v1 + "&" + k2 + "=" + v2
		n, err := Parse(s)
		if err != nil {
			return
		}
		canon := n.String()
		if back, err := Parse(canon); err != nil || back.String() != canon {
			t.Fatalf("Parse(%q).String() = %q does not read back: %v", s, canon, err)
		}
		if !n.IsURN() {
			return
		}
		if grpcOut, ok := grpcHandles(s); ok && grpcOut != canon {
			t.Fatalf("Canonical(%q) = %q, grpc-go sends %q", s, canon, grpcOut)
		}
	})
}
