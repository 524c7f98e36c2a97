package xdsname

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustParse(t testing.TB, s string) Name {
	t.Helper()
	n, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return n
}

func TestIsGlobIsURN(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantGlob bool
		wantURN  bool
	}{
		{"URN", "xdstp://a/T/x", false, true},
		{"URN with params", "xdstp://a/T/d/x?k=v", false, true},
		{"glob", "xdstp://a/T/d/*", true, false},
		{"glob of type", "xdstp://a/T/*", true, false},
		{"glob with params", "xdstp://a/T/d/*?k=v", true, false},
		{"escaped star is URN", "xdstp://a/T/d/%2A", false, true},
		{"escaped star alone is URN", "xdstp://a/T/%2A", false, true},
		{"star inside segment is URN", "xdstp://a/T/d/x*", false, true},
		{"entry makes a URL", "xdstp://a/T/x#entry=e", false, false},
		{"alt makes a URL", "xdstp://a/T/x#alt=xdstp://b/T/y", false, false},
		{"glob with alt", "xdstp://a/T/d/*#alt=xdstp://b/T/e/*", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mustParse(t, tc.in)
			if got := n.IsGlob(); got != tc.wantGlob {
				t.Errorf("IsGlob(%q) = %v, want %v", tc.in, got, tc.wantGlob)
			}
			if got := n.IsURN(); got != tc.wantURN {
				t.Errorf("IsURN(%q) = %v, want %v", tc.in, got, tc.wantURN)
			}
		})
	}
}

func TestGlobOf(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"in a dir", "xdstp://a/T/dir/x", "xdstp://a/T/dir/*"},
		{"nested dir", "xdstp://a/T/d1/d2/x", "xdstp://a/T/d1/d2/*"},
		{"no dir", "xdstp://a/T/x", "xdstp://a/T/*"},
		{"params kept", "xdstp://a/T/dir/x?b=2&a=1", "xdstp://a/T/dir/*?a=1&b=2"},
		{"empty authority", "xdstp:///T/dir/x", "xdstp:///T/dir/*"},
		{"directives dropped", "xdstp://a/T/dir/x#entry=e", "xdstp://a/T/dir/*"},
		{"literal star resource", "xdstp://a/T/dir/%2A", "xdstp://a/T/dir/*"},
		{"leading empty segment", "xdstp://a/T//x", "xdstp://a/T//*"},
		{"trailing slash", "xdstp://a/T/dir/", "xdstp://a/T/dir/*"},
		{"glob is its own", "xdstp://a/T/dir/*", "xdstp://a/T/dir/*"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := mustParse(t, tc.in).GlobOf()
			if !g.IsGlob() {
				t.Errorf("GlobOf(%q) = %+v is not a glob", tc.in, g)
			}
			if diff := cmp.Diff(tc.want, g.String()); diff != "" {
				t.Errorf("GlobOf(%q) (-want +got):\n%s", tc.in, diff)
			}
			if diff := cmp.Diff(mustParse(t, tc.want), g); diff != "" {
				t.Errorf("GlobOf(%q) differs from Parse(%q) (-want +got):\n%s", tc.in, tc.want, diff)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		name string
		glob string
		urn  string
		want bool
	}{
		{"direct child", "xdstp://a/T/dir/*", "xdstp://a/T/dir/x", true},
		{"deeper is not", "xdstp://a/T/dir/*", "xdstp://a/T/dir/sub/x", false},
		{"parent is not", "xdstp://a/T/dir/sub/*", "xdstp://a/T/dir/x", false},
		{"other dir", "xdstp://a/T/dir/*", "xdstp://a/T/dirx/y", false},
		{"type glob takes top level", "xdstp://a/T/*", "xdstp://a/T/x", true},
		{"type glob not nested", "xdstp://a/T/*", "xdstp://a/T/dir/x", false},
		{"equal params", "xdstp://a/T/dir/*?k=v", "xdstp://a/T/dir/x?k=v", true},
		{"param order irrelevant", "xdstp://a/T/dir/*?a=1&b=2", "xdstp://a/T/dir/x?b=2&a=1", true},
		{"spec: missing param", "xdstp://a/T/foo/*?some=thing", "xdstp://a/T/foo/bar", false},
		{"extra param", "xdstp://a/T/dir/*", "xdstp://a/T/dir/x?k=v", false},
		{"different value", "xdstp://a/T/dir/*?k=v", "xdstp://a/T/dir/x?k=w", false},
		{"different authority", "xdstp://a/T/dir/*", "xdstp://b/T/dir/x", false},
		{"empty versus set authority", "xdstp:///T/dir/*", "xdstp://a/T/dir/x", false},
		{"different type", "xdstp://a/T/dir/*", "xdstp://a/U/dir/x", false},
		{"literal star resource is a member", "xdstp://a/T/dir/*", "xdstp://a/T/dir/%2A", true},
		{"glob is not a member", "xdstp://a/T/dir/*", "xdstp://a/T/dir/sub/*", false},
		{"glob not member of itself", "xdstp://a/T/dir/*", "xdstp://a/T/dir/*", false},
		{"URL with directive is not", "xdstp://a/T/dir/*", "xdstp://a/T/dir/x#entry=e", false},
		{"not a glob matches nothing", "xdstp://a/T/dir/x", "xdstp://a/T/dir/x", false},
		{"literal star is not a glob", "xdstp://a/T/dir/%2A", "xdstp://a/T/dir/x", false},
		{"escaped slash decoded", "xdstp://a/T/dir/*", "xdstp://a/T/dir%2Fx", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, u := mustParse(t, tc.glob), mustParse(t, tc.urn)
			if got := g.Matches(u); got != tc.want {
				t.Errorf("Parse(%q).Matches(%q) = %v, want %v", tc.glob, tc.urn, got, tc.want)
			}
			// Matches agrees with GlobOf for URNs.
			if u.IsURN() && g.IsGlob() && g.Alt == "" && g.Entry == "" {
				if byGlobOf := u.GlobOf().String() == g.String(); byGlobOf != tc.want {
					t.Errorf("GlobOf(%q) = %q; membership by GlobOf %v, want %v", tc.urn, u.GlobOf(), byGlobOf, tc.want)
				}
			}
		})
	}
}

func TestHandBuiltParamsInAnyOrder(t *testing.T) {
	n := Name{Authority: "a", Type: "T", ID: "d/x", Params: []Param{{"b", "2"}, {"a", "1"}}}
	if diff := cmp.Diff("xdstp://a/T/d/x?a=1&b=2", n.String()); diff != "" {
		t.Errorf("String() of unsorted params (-want +got):\n%s", diff)
	}
	g := Name{Authority: "a", Type: "T", ID: "d/*", Params: []Param{{"a", "1"}, {"b", "2"}}}
	if !g.Matches(n) {
		t.Errorf("%v.Matches(%v) = false, want true", g, n)
	}
	if diff := cmp.Diff([]Param{{"b", "2"}, {"a", "1"}}, n.Params); diff != "" {
		t.Errorf("String or Matches changed the caller's params (-want +got):\n%s", diff)
	}
}
