package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/internal/access"
)

const secretTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

func TestValidateAccess(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(file, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	mtls := "downstream:\n  tls: {cert_file: " + file + ", key_file: " + file + ", ca_file: " + file + "}\n"
	// Every case is minimalAuthorities (lines 1-3) plus the lines shown.
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "every matcher kind is valid", extra: "    allow:\n      - uri_san: \"spiffe://fleet.example/ns/prod/*\"\n      - dns_san: \"*.prod.example\"\n      - node_cluster: \"prod-*\"\n      - node_id: \"envoy-*\"\n" +
			"    allow_by_type:\n      " + secretTypeURL + ":\n        - uri_san: \"spiffe://fleet.example/ns/prod/sa/gateway\"\n"},
		{name: "rest_listen and admin_pprof are valid", extra: "rest_listen: 127.0.0.1:0\nadmin_pprof: true\n"},
		{name: "node_identity with mTLS is valid", extra: mtls + "  node_identity: \"spiffe://fleet.example/ns/*/sa/{cluster}\"\n"},

		{name: "two matchers in one entry", extra: "    allow:\n      - uri_san: a\n        node_id: b\n",
			want: []problem{{"authorities[0].allow[0]", 5, "want exactly one of uri_san, dns_san, node_id, node_cluster"}}},
		{name: "empty pattern", extra: "    allow:\n      - node_id: \"\"\n",
			want: []problem{{"authorities[0].allow[0]", 5, "got 0"}}},
		{name: "empty allow list", extra: "    allow: []\n",
			want: []problem{{"authorities[0].allow", 4, "empty list: it would deny every client"}}},
		{name: "unknown matcher", extra: "    allow:\n      - spiffe_id: a\n",
			want: []problem{{"authorities[0].allow[0].spiffe_id", 5, `unknown key "spiffe_id"`}, {"authorities[0].allow[0]", 5, "got 0"}}},
		{name: "allow_by_type key not a served type", extra: "    allow_by_type:\n      type.googleapis.com/made.up.Type:\n        - node_id: x\n",
			want: []problem{{"authorities[0].allow_by_type.type.googleapis.com/made.up.Type", 5, "nor one listed in authorities[0].types"}}},
		{name: "allow_by_type key a listed type", extra: "    types: [type.googleapis.com/made.up.Type]\n    allow_by_type:\n      type.googleapis.com/made.up.Type:\n        - node_id: x\n"},
		{name: "allow_by_type entry bad", extra: "    allow_by_type:\n      " + secretTypeURL + ":\n        - {}\n",
			want: []problem{{"authorities[0].allow_by_type." + secretTypeURL + "[0]", 6, "want exactly one of"}}},
		{name: "node_identity without client certificates", extra: "downstream:\n  node_identity: \"spiffe://x/{cluster}\"\n",
			want: []problem{{"downstream.node_identity", 5, "needs client certificates (downstream.tls.ca_file)"}}},
		{name: "node_identity without placeholder", extra: mtls + "  node_identity: \"spiffe://x/*\"\n",
			want: []problem{{"downstream.node_identity", 6, "names neither {cluster} nor {id}"}}},
		{name: "node_identity unknown placeholder", extra: mtls + "  node_identity: \"spiffe://x/{zone}\"\n",
			want: []problem{{"downstream.node_identity", 6, "unknown placeholder {zone}"}}},
		{name: "rest_listen not host:port", extra: "rest_listen: nope\n",
			want: []problem{{"rest_listen", 4, `"nope" is not host:port`}}},
		{name: "rest_listen same as admin", extra: "admin: 127.0.0.1:7\nrest_listen: 127.0.0.1:7\n",
			want: []problem{{"rest_listen", 5, "same address as admin"}}},
		{name: "admin_pprof not a bool", extra: "admin_pprof: sometimes\n",
			want: []problem{{"admin_pprof", 4, "want true or false"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimalAuthorities+tt.extra), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestAccessDefaults(t *testing.T) {
	c := Default()
	if c.RESTListen != "" || c.AdminPprof || c.Downstream.NodeIdentity != "" {
		t.Errorf("defaults: rest_listen %q, admin_pprof %v, node_identity %q; want off", c.RESTListen, c.AdminPprof, c.Downstream.NodeIdentity)
	}
}

func TestAccessOptions(t *testing.T) {
	c, err := Parse([]byte(minimalAuthorities+"    allow:\n      - node_cluster: \"prod-*\"\n"+
		"    allow_by_type:\n      "+secretTypeURL+":\n        - uri_san: \"spiffe://x/gw\"\n"+
		"  - name: open\n    origins: [\"h:2\"]\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := access.Options{Authorities: map[string]access.Authority{"a": {
		Allow:       []access.AllowEntry{{NodeCluster: "prod-*"}},
		AllowByType: map[string][]access.AllowEntry{secretTypeURL: {{URISAN: "spiffe://x/gw"}}},
	}}}
	if diff := cmp.Diff(want, c.AccessOptions()); diff != "" {
		t.Errorf("AccessOptions (-want +got):\n%s", diff)
	}
	if _, err := access.New(c.AccessOptions()); err != nil {
		t.Errorf("access.New of a validated config: %v", err)
	}
}
