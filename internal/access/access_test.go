package access

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		name, pattern, value string
		want                 bool
	}{
		{"literal equal", "spiffe://fleet.example/ns/prod/sa/app", "spiffe://fleet.example/ns/prod/sa/app", true},
		{"literal differs", "spiffe://fleet.example/ns/prod/sa/app", "spiffe://fleet.example/ns/prod/sa/ap", false},
		{"literal is not a prefix match", "prod", "prod-1", false},
		{"star crosses slash", "spiffe://fleet.example/ns/prod/*", "spiffe://fleet.example/ns/prod/sa/app", true},
		{"star needs the literal prefix", "spiffe://fleet.example/ns/prod/*", "spiffe://fleet.example/ns/staging/sa/app", false},
		{"star matches empty", "prod-*", "prod-", true},
		{"star alone matches anything", "*", "anything/at/all", true},
		{"star alone matches empty", "*", "", true},
		{"leading star", "*.prod.example", "a.b.prod.example", true},
		{"leading star needs suffix", "*.prod.example", "prod.example", false},
		{"two stars", "spiffe://*/ns/*/sa/gateway", "spiffe://fleet.example/ns/prod/sa/gateway", true},
		{"two stars, literal middle missing", "spiffe://*/ns/*/sa/gateway", "spiffe://fleet.example/prod/sa/gateway", false},
		{"middle occurs late", "a*b*c", "axxbyybzzc", true},
		{"prefix and suffix overlap", "ab*ba", "aba", false},
		{"consecutive stars", "a**c", "abc", true},
		{"empty pattern matches empty only", "", "", true},
		{"empty pattern", "", "x", false},
		{"empty value", "a*", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compile(tc.pattern).Match(tc.value); got != tc.want {
				t.Errorf("Compile(%q).Match(%q) = %v, want %v", tc.pattern, tc.value, got, tc.want)
			}
		})
	}
}

func TestPatternMatchAllocatesNothing(t *testing.T) {
	p := Compile("spiffe://*/ns/prod/*")
	if n := testing.AllocsPerRun(100, func() { p.Match("spiffe://fleet.example/ns/prod/sa/app") }); n != 0 {
		t.Errorf("Match allocates %v times, want 0", n)
	}
}

const secretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
const clusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

func TestPolicyAllowed(t *testing.T) {
	p, err := New(Options{Authorities: map[string]Authority{
		"auth.example": {
			Allow: []AllowEntry{
				{URISAN: "spiffe://fleet.example/ns/prod/*"},
				{DNSSAN: "*.prod.example"},
				{NodeCluster: "prod-*"},
				{NodeID: "envoy-*"},
			},
			AllowByType: map[string][]AllowEntry{secretType: {{URISAN: "spiffe://fleet.example/ns/prod/sa/gateway"}}},
		},
		"open.example":   {},
		"closed.example": {Allow: []AllowEntry{}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		authority string
		typeURL   string
		id        Identity
		want      bool
	}{
		{"uri san", "auth.example", clusterType, Identity{URISANs: []string{"spiffe://fleet.example/ns/prod/sa/app"}}, true},
		{"second uri san", "auth.example", clusterType, Identity{URISANs: []string{"spiffe://other/x", "spiffe://fleet.example/ns/prod/sa/app"}}, true},
		{"dns san", "auth.example", clusterType, Identity{DNSSANs: []string{"api.prod.example"}}, true},
		{"node cluster", "auth.example", clusterType, Identity{NodeCluster: "prod-east"}, true},
		{"node id", "auth.example", clusterType, Identity{NodeID: "envoy-1"}, true},
		{"nothing matches", "auth.example", clusterType, Identity{URISANs: []string{"spiffe://fleet.example/ns/staging/sa/app"}, NodeCluster: "staging", NodeID: "x"}, false},
		{"empty identity", "auth.example", clusterType, Identity{}, false},
		{"dns pattern is not uri", "auth.example", clusterType, Identity{URISANs: []string{"api.prod.example"}}, false},
		{"secret: narrower list", "auth.example", secretType, Identity{URISANs: []string{"spiffe://fleet.example/ns/prod/sa/app"}, NodeCluster: "prod-east"}, false},
		{"secret: gateway", "auth.example", secretType, Identity{URISANs: []string{"spiffe://fleet.example/ns/prod/sa/gateway"}}, true},
		{"authority without rules", "open.example", secretType, Identity{}, true},
		{"authority not configured", "nowhere", clusterType, Identity{}, true},
		{"empty allow list denies", "closed.example", clusterType, Identity{NodeID: "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Allowed(tc.authority, tc.typeURL, &tc.id); got != tc.want {
				t.Errorf("Allowed(%s, %s, %+v) = %v, want %v", tc.authority, tc.typeURL, tc.id, got, tc.want)
			}
		})
	}
	var nilPolicy *Policy
	if !nilPolicy.Allowed("auth.example", clusterType, &Identity{}) || nilPolicy.Restricted("auth.example", clusterType) {
		t.Error("a nil policy must allow everything")
	}
	if p.Restricted("open.example", clusterType) || !p.Restricted("auth.example", secretType) {
		t.Error("Restricted: want false for an open authority, true for one with rules")
	}
	for _, tc := range []struct {
		name    string
		typeURL string
		id      Identity
		want    bool
	}{
		{"allowed by every authority", clusterType, Identity{URISANs: []string{"spiffe://fleet.example/ns/prod/sa/app"}}, true},
		{"denied by one", clusterType, Identity{NodeCluster: "prod-east"}, true},
		{"secret list denies", secretType, Identity{URISANs: []string{"spiffe://fleet.example/ns/prod/sa/app"}}, true},
	} {
		// closed.example denies everyone: every identity is denied something.
		if got := p.DeniesAny(tc.typeURL, &tc.id); got != tc.want {
			t.Errorf("DeniesAny(%s, %+v) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
	open, err := New(Options{Authorities: map[string]Authority{"auth.example": {Allow: []AllowEntry{{NodeCluster: "prod-*"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if open.DeniesAny(clusterType, &Identity{NodeCluster: "prod-1"}) || !open.DeniesAny(clusterType, &Identity{NodeCluster: "staging"}) || nilPolicy.DeniesAny(clusterType, &Identity{}) {
		t.Error("DeniesAny: want false for an allowed identity and a nil policy, true for a denied one")
	}
}

func TestNewRejectsBadRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"two matchers", Options{Authorities: map[string]Authority{"a": {Allow: []AllowEntry{{URISAN: "x", DNSSAN: "y"}}}}}},
		{"no matcher", Options{Authorities: map[string]Authority{"a": {Allow: []AllowEntry{{}}}}}},
		{"bad by type", Options{Authorities: map[string]Authority{"a": {AllowByType: map[string][]AllowEntry{secretType: {{}}}}}}},
		{"template without placeholder", Options{NodeIdentity: "spiffe://fleet.example/*"}},
		{"template with unknown placeholder", Options{NodeIdentity: "spiffe://fleet.example/{zone}"}},
		{"template unclosed", Options{NodeIdentity: "spiffe://fleet.example/{cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opts); !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("New = %v, want ErrInvalidPolicy", err)
			}
		})
	}
}

func TestCheckNode(t *testing.T) {
	p, err := New(Options{NodeIdentity: "spiffe://fleet.example/ns/*/sa/{cluster}"})
	if err != nil {
		t.Fatal(err)
	}
	uri := []string{"spiffe://fleet.example/ns/prod/sa/gateway"}
	for _, tc := range []struct {
		name string
		id   Identity
		ok   bool
	}{
		{"cluster named by the certificate", Identity{URISANs: uri, NodeCluster: "gateway"}, true},
		{"another cluster", Identity{URISANs: uri, NodeCluster: "payments"}, false},
		{"glob in the claim is literal", Identity{URISANs: uri, NodeCluster: "*"}, false},
		{"no cluster", Identity{URISANs: uri}, false},
		{"no certificate", Identity{NodeCluster: "gateway"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.CheckNode(&tc.id)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrNodeMismatch)) {
				t.Errorf("CheckNode(%+v) = %v, want ok=%v", tc.id, err, tc.ok)
			}
		})
	}
	exact, err := New(Options{NodeIdentity: "spiffe://fleet.example/node/{id}"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exact.CheckNode(&Identity{URISANs: []string{"spiffe://fleet.example/node/envoy-1"}, NodeID: "envoy-1"}); err != nil {
		t.Errorf("exact template: %v", err)
	}
	if err := exact.CheckNode(&Identity{URISANs: []string{"spiffe://fleet.example/node/envoy-1x"}, NodeID: "envoy-1"}); err == nil {
		t.Error("exact template matched a longer SAN")
	}
	var none *Policy
	if err := none.CheckNode(&Identity{}); err != nil {
		t.Errorf("no template: %v", err)
	}
}

// BenchmarkAllowed measures one uncached decision: a four-rule list where
// the last rule matches.
func BenchmarkAllowed(b *testing.B) {
	p, err := New(Options{Authorities: map[string]Authority{"a": {Allow: []AllowEntry{
		{URISAN: "spiffe://fleet.example/ns/prod/*"}, {DNSSAN: "*.prod.example"},
		{NodeCluster: "prod-*"}, {NodeID: "envoy-*"},
	}}}})
	if err != nil {
		b.Fatal(err)
	}
	id := &Identity{URISANs: []string{"spiffe://fleet.example/ns/staging/sa/app"}, DNSSANs: []string{"app.staging.example"}, NodeCluster: "staging", NodeID: "envoy-1"}
	b.ReportAllocs()
	for b.Loop() {
		if !p.Allowed("a", clusterType, id) {
			b.Fatal("denied")
		}
	}
}
