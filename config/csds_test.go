package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCSDSListen(t *testing.T) {
	// Every case is minimalAuthorities (lines 1-3) plus the lines shown.
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "off by default", extra: ""},
		{name: "an address of its own", extra: "csds_listen: 127.0.0.1:18002\n"},
		{name: "port 0 beside port 0", extra: "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\ncsds_listen: 127.0.0.1:0\n"},
		{name: "not host:port", extra: "csds_listen: nope\n",
			want: []problem{{"csds_listen", 4, `"nope" is not host:port`}}},
		{name: "same as listen", extra: "listen: 127.0.0.1:7\ncsds_listen: 127.0.0.1:7\n",
			want: []problem{{"csds_listen", 5, "same address as listen (127.0.0.1:7)"}}},
		{name: "same as admin", extra: "admin: 127.0.0.1:8\ncsds_listen: 127.0.0.1:8\n",
			want: []problem{{"csds_listen", 5, "same address as admin"}}},
		{name: "same as rest_listen", extra: "rest_listen: 127.0.0.1:9\ncsds_listen: 127.0.0.1:9\n",
			want: []problem{{"csds_listen", 5, "same address as rest_listen"}}},
		{name: "not a string", extra: "csds_listen: [a]\n",
			want: []problem{{"csds_listen", 4, ""}}},
		{name: "streams per caller", extra: "csds_listen: 127.0.0.1:0\ncsds_max_streams_per_caller: 1\n"},
		{name: "no stream per caller", extra: "csds_listen: 127.0.0.1:0\ncsds_max_streams_per_caller: 0\n",
			want: []problem{{"csds_max_streams_per_caller", 5, "must be at least 1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(minimalAuthorities+tt.extra), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
			if tt.extra == "" && (err != nil || c.CSDSListen != "" || c.CSDSMaxStreamsPerCaller != DefaultCSDSMaxStreamsPerCaller) {
				t.Errorf("default csds_listen %q, csds_max_streams_per_caller %d (err %v), want off and %d",
					c.CSDSListen, c.CSDSMaxStreamsPerCaller, err, DefaultCSDSMaxStreamsPerCaller)
			}
		})
	}
}

// TestCSDSAllow: CSDS lists every client's resource names, so an authority
// that restricts its readers makes csds_allow required, and csds_allow
// matches certificates only.
func TestCSDSAllow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(file, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	mtls := "downstream:\n  tls: {cert_file: " + file + ", key_file: " + file + ", ca_file: " + file + "}\n"
	restricted := "    allow:\n      - uri_san: \"spiffe://fleet.example/*\"\n" // lines 4-5
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "open authorities need no list", extra: "csds_listen: 127.0.0.1:0\n"},
		{name: "restricted authority, no list", extra: restricted + "csds_listen: 127.0.0.1:0\n",
			want: []problem{{"csds_listen", 6, "authorities[0] restricts who may read it"}}},
		{name: "restricted authority, a list", extra: restricted + "csds_listen: 127.0.0.1:0\ncsds_allow:\n  - uri_san: \"spiffe://fleet.example/ops/*\"\n  - dns_san: \"ops.example\"\n" + mtls},
		{name: "restricted by type, no list", extra: "    allow_by_type:\n      " + secretTypeURL + ":\n        - dns_san: \"gw.example\"\ncsds_listen: 127.0.0.1:0\n",
			want: []problem{{"csds_listen", 7, "authorities[0] restricts who may read it"}}},
		{name: "node rules are a claim", extra: "csds_listen: 127.0.0.1:0\ncsds_allow:\n  - node_id: \"ops\"\n" + mtls,
			want: []problem{{"csds_allow[0]", 6, "node_id and node_cluster are a caller's claim"}}},
		{name: "a list needs client certificates", extra: "csds_listen: 127.0.0.1:0\ncsds_allow:\n  - uri_san: \"spiffe://fleet.example/ops\"\n",
			want: []problem{{"csds_allow", 5, "needs client certificates (downstream.tls.ca_file)"}}},
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
