package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(file, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	// Every case is minimalAuthorities (lines 1-3) plus the lines shown.
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "minimal is valid"},
		{name: "port 0 and every-interface listen are valid", extra: "listen: \":0\"\nadmin: 127.0.0.1:0\n"},
		{name: "legacy-only authority name is valid", extra: "  - name: legacy\n    origins: [\"h:2\"]\n"},
		{name: "per-type transports are valid", extra: "  - name: b\n    origins: [\"h:2\"]\n    transport: delta-per-type\n  - name: c\n    origins: [\"h:3\"]\n    transport: sotw-per-type\n"},
		{name: "file origin is valid", extra: "  - name: files\n    origins: [\"file://" + dir + "\"]\n"},
		{name: "TLS files that exist are valid", extra: "downstream:\n  tls: {cert_file: " + file + ", key_file: " + file + ", ca_file: " + file + "}\n" +
			"upstream:\n  tls: {enabled: true, ca_file: " + file + ", cert_file: " + file + ", key_file: " + file + ", server_name: x}\n"},

		{name: "listen not host:port", extra: "listen: nope\n", want: []problem{{"listen", 4, `"nope" is not host:port: missing port in address`}}},
		{name: "listen empty", extra: "listen: \"\"\n", want: []problem{{"listen", 4, "must not be empty"}}},
		{name: "listen port out of range", extra: "listen: a:99999\n", want: []problem{{"listen", 4, `port "99999" is not a number from 0 to 65535`}}},
		{name: "admin not host:port", extra: "admin: localhost\n", want: []problem{{"admin", 4, `"localhost" is not host:port`}}},
		{name: "admin same as listen", extra: "listen: 127.0.0.1:5\nadmin: 127.0.0.1:5\n", want: []problem{{"admin", 5, "same address as listen"}}},
		{name: "admin_allowed_hosts names are valid", extra: "admin_allowed_hosts: [relay.example, xds-relay.ns.svc.cluster.local.]\n"},
		{name: "admin_allowed_hosts with a port", extra: "admin_allowed_hosts: [ok.example, \"relay.example:18001\", \"*.example\", \"\"]\n", want: []problem{
			{"admin_allowed_hosts[1]", 4, `"relay.example:18001" is not a host name`},
			{"admin_allowed_hosts[2]", 4, `"*.example" is not a host name`},
			{"admin_allowed_hosts[3]", 4, `"" is not a host name`},
		}},
		{name: "node id empty", extra: "node:\n  id: \"\"\n", want: []problem{{"node.id", 5, "must not be empty"}}},

		{name: "duplicate authority", extra: "  - name: a\n    origins: [\"h:2\"]\n", want: []problem{{"authorities[1].name", 4, `duplicate authority name "a" (first at authorities[0].name, line 2)`}}},
		{name: "authority name empty", extra: "  - origins: [\"h:2\"]\n", want: []problem{{"authorities[1].name", 4, "must not be empty"}}},
		{name: "authority name with slash", extra: "  - name: a/b\n    origins: [\"h:2\"]\n", want: []problem{{"authorities[1].name", 4, `"a/b" is not an authority`}}},
		{name: "no origins", extra: "  - name: b\n", want: []problem{{"authorities[1].origins", 4, "at least one origin is required"}}},
		{name: "empty origins", extra: "  - name: b\n    origins: []\n", want: []problem{{"authorities[1].origins", 5, "at least one origin is required"}}},
		{name: "origin without port", extra: "  - name: b\n    origins: [\"h\"]\n", want: []problem{{"authorities[1].origins[0]", 5, `"h" is neither host:port nor file://DIR`}}},
		{name: "origin with other scheme", extra: "  - name: b\n    origins: [\"http://h:1\"]\n", want: []problem{{"authorities[1].origins[0]", 5, `"http://h:1" is neither host:port nor file://DIR`}}},
		{name: "origin without host", extra: "  - name: b\n    origins: [\":1\"]\n", want: []problem{{"authorities[1].origins[0]", 5, "missing host"}}},
		{name: "origin port 0", extra: "  - name: b\n    origins: [\"h:0\"]\n", want: []problem{{"authorities[1].origins[0]", 5, "port 0 cannot be dialled"}}},
		{name: "file origin without dir", extra: "  - name: b\n    origins: [\"file://\"]\n", want: []problem{{"authorities[1].origins[0]", 5, "file origin needs a directory"}}},
		{name: "file origin missing dir", extra: "  - name: b\n    origins: [\"file://" + missing + "\"]\n", want: []problem{{"authorities[1].origins[0]", 5, missing + ": no such file or directory"}}},
		{name: "file origin is a file", extra: "  - name: b\n    origins:\n      - \"h:1\"\n      - \"file://" + file + "\"\n", want: []problem{{"authorities[1].origins[1]", 7, "is not a directory"}}},
		{name: "transport unknown", extra: "  - name: b\n    origins: [\"h:2\"]\n    transport: rest\n", want: []problem{{"authorities[1].transport", 6, `"rest" is not one of delta, sotw, delta-per-type, sotw-per-type`}}},
		{name: "glob_collections unknown", extra: "  - name: b\n    origins: [\"h:2\"]\n    glob_collections: maybe\n", want: []problem{{"authorities[1].glob_collections", 6, `"maybe" is not one of native, emulated`}}},

		{name: "max_resources negative", extra: "cache:\n  max_resources: -1\n", want: []problem{{"cache.max_resources", 5, "must not be negative"}}},
		{name: "max_bytes negative", extra: "cache:\n  max_bytes: -1\n", want: []problem{{"cache.max_bytes", 5, `"-1" is negative`}}},
		{name: "max_bytes unparsable", extra: "cache:\n  max_bytes: 1MB\n", want: []problem{{"cache.max_bytes", 5, `invalid byte size: "1MB"`}}},
		{name: "refetch_interval negative", extra: "cache:\n  refetch_interval: -1s\n", want: []problem{{"cache.refetch_interval", 5, "must not be negative"}}},
		{name: "log level", extra: "log:\n  level: trace\n", want: []problem{{"log.level", 5, `"trace" is not one of debug, info, warn, error`}}},
		{name: "log format", extra: "log:\n  format: text\n", want: []problem{{"log.format", 5, `"text" is not one of json, console`}}},

		{name: "downstream cert missing", extra: "downstream:\n  tls:\n    cert_file: " + missing + "\n    key_file: " + file + "\n",
			want: []problem{{"downstream.tls.cert_file", 6, missing + ": no such file or directory"}}},
		{name: "downstream key without cert", extra: "downstream:\n  tls:\n    key_file: " + file + "\n",
			want: []problem{{"downstream.tls.cert_file", 6, "required when key_file is set"}}},
		{name: "downstream cert without key", extra: "downstream:\n  tls:\n    cert_file: " + file + "\n",
			want: []problem{{"downstream.tls.key_file", 6, "required when cert_file is set"}}},
		{name: "downstream ca without cert", extra: "downstream:\n  tls:\n    ca_file: " + file + "\n",
			want: []problem{{"downstream.tls.cert_file", 6, "required when ca_file is set"}}},
		{name: "downstream cert is a directory", extra: "downstream:\n  tls:\n    cert_file: " + dir + "\n    key_file: " + file + "\n",
			want: []problem{{"downstream.tls.cert_file", 6, "is a directory"}}},
		{name: "keepalive time zero", extra: "downstream:\n  keepalive:\n    time: 0s\n", want: []problem{{"downstream.keepalive.time", 6, "must be a positive duration, got 0s"}}},
		{name: "keepalive timeout zero", extra: "downstream:\n  keepalive:\n    timeout: 0s\n", want: []problem{{"downstream.keepalive.timeout", 6, "must be a positive duration"}}},
		{name: "min ping interval negative", extra: "downstream:\n  keepalive:\n    min_client_ping_interval: -1s\n", want: []problem{{"downstream.keepalive.min_client_ping_interval", 6, "must not be negative"}}},
		{name: "recv size zero", extra: "downstream:\n  max_recv_msg_size: 0\n", want: []problem{{"downstream.max_recv_msg_size", 5, "must be between 1B and 2147483647 bytes, got 0B"}}},
		{name: "send size too large", extra: "downstream:\n  max_send_msg_size: 2GiB\n", want: []problem{{"downstream.max_send_msg_size", 5, "got 2GiB"}}},
		{name: "send_timeout zero", extra: "downstream:\n  send_timeout: 0s\n", want: []problem{{"downstream.send_timeout", 5, "must be a positive duration"}}},
		{name: "a type the relay does not serve is carried", extra: "    types: [type.googleapis.com/envoy.config.cluster.v3.Cluster, type.googleapis.com/mesh.example.v1.Workload]\n"},
		{name: "a type URL without the prefix", extra: "    types: [envoy.config.cluster.v3.Cluster]\n", want: []problem{{"authorities[0].types[0]", 4, `must start with "type.googleapis.com/"`}}},
		{name: "a type URL without a message name", extra: "    types: [\"type.googleapis.com/not a name\", type.googleapis.com/Bare]\n", want: []problem{
			{"authorities[0].types[0]", 4, "is not a full protobuf message name"},
			{"authorities[0].types[1]", 4, "is not a full protobuf message name"}}},
		{name: "the resource wrapper is not a type", extra: "    types: [type.googleapis.com/envoy.service.discovery.v3.Resource]\n", want: []problem{{"authorities[0].types[0]", 4, "is the SotW resource wrapper"}}},
		{name: "connection age off with no grace is valid", extra: "downstream:\n  max_connection_age: 0s\n  max_connection_age_grace: 0s\n  drain_delay: 0s\n"},
		{name: "connection age negative", extra: "downstream:\n  max_connection_age: -1s\n", want: []problem{{"downstream.max_connection_age", 5, "must not be negative"}}},
		{name: "connection age without grace", extra: "downstream:\n  max_connection_age: 1m\n  max_connection_age_grace: 0s\n", want: []problem{{"downstream.max_connection_age_grace", 6, "must be a positive duration"}}},
		{name: "drain delay negative", extra: "downstream:\n  drain_delay: -1s\n", want: []problem{{"downstream.drain_delay", 5, "must not be negative"}}},
		{name: "drain waves zero", extra: "downstream:\n  drain_waves: 0\n", want: []problem{{"downstream.drain_waves", 5, "must be between 1 and 1000, got 0"}}},
		{name: "drain duration negative", extra: "downstream:\n  drain_duration: -2s\n", want: []problem{{"downstream.drain_duration", 5, "must not be negative"}}},
		{name: "a limit zero", extra: "downstream:\n  limits:\n    max_names_per_stream: 0\n", want: []problem{{"downstream.limits.max_names_per_stream", 6, "must be a positive number"}}},

		{name: "upstream ca missing", extra: "upstream:\n  tls:\n    enabled: true\n    ca_file: " + missing + "\n", want: []problem{{"upstream.tls.ca_file", 7, "no such file or directory"}}},
		{name: "upstream tls settings while disabled", extra: "upstream:\n  tls:\n    ca_file: " + file + "\n", want: []problem{{"upstream.tls.enabled", 5, "TLS settings are given but enabled is false"}}},
		{name: "upstream cert without key", extra: "upstream:\n  tls:\n    enabled: true\n    cert_file: " + file + "\n", want: []problem{{"upstream.tls.key_file", 7, "required when cert_file is set"}}},
		{name: "upstream keepalive zero", extra: "upstream:\n  keepalive: {time: 0s, timeout: -1s}\n", want: []problem{
			{"upstream.keepalive.time", 5, "must be a positive duration"},
			{"upstream.keepalive.timeout", 5, "must be a positive duration"},
		}},
		{name: "upstream recv size zero", extra: "upstream:\n  max_recv_msg_size: 0B\n", want: []problem{{"upstream.max_recv_msg_size", 5, "must be between"}}},
		{name: "connect_timeout negative", extra: "upstream:\n  connect_timeout: -1s\n", want: []problem{{"upstream.connect_timeout", 5, "must be a positive duration, got -1s"}}},
		{name: "failback_interval zero", extra: "upstream:\n  failback_interval: 0s\n", want: []problem{{"upstream.failback_interval", 5, "must be a positive duration, got 0s"}}},
		{name: "backoff max below initial", extra: "upstream:\n  backoff:\n    initial: 2s\n    max: 1s\n", want: []problem{{"upstream.backoff.max", 7, "1s is below backoff.initial (2s)"}}},
		{name: "backoff initial zero", extra: "upstream:\n  backoff:\n    initial: 0s\n", want: []problem{{"upstream.backoff.initial", 6, "must be a positive duration"}}},
		{name: "backoff multiplier below 1", extra: "upstream:\n  backoff:\n    multiplier: 0.5\n", want: []problem{{"upstream.backoff.multiplier", 6, "must be a finite number >= 1, got 0.5"}}},
		{name: "backoff jitter above 1", extra: "upstream:\n  backoff:\n    jitter: 1.5\n", want: []problem{{"upstream.backoff.jitter", 6, "must be between 0 and 1, got 1.5"}}},
		{name: "backoff jitter NaN", extra: "upstream:\n  backoff:\n    jitter: .nan\n", want: []problem{{"upstream.backoff.jitter", 6, "must be between 0 and 1, got NaN"}}},
		{name: "shutdown grace zero", extra: "shutdown_grace_period: 0s\n", want: []problem{{"shutdown_grace_period", 4, "must be a positive duration"}}},
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

func TestValidateWithoutSource(t *testing.T) {
	c := Default()
	err := c.Validate()
	if got, want := err.Error(), "authorities: at least one authority is required"; got != want {
		t.Errorf("Default().Validate() = %q, want %q", got, want)
	}
	c.Authorities = []Authority{{Name: "a", Origins: []string{"h:1"}, Transport: xdstype.TransportDelta, GlobCollections: GlobNative}}
	if err := c.Validate(); err != nil {
		t.Errorf("Default() plus an authority: %v", err)
	}
	c.Authorities[0].Transport = ""
	c.Log.Level = "loud"
	want := []problem{
		{"authorities[0].transport", 0, `"" is not one of delta, sotw`},
		{"log.level", 0, `"loud" is not one of`},
	}
	if diff := diffProblems(want, problemsOf(t, c.Validate())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAuthorityLookup(t *testing.T) {
	c, err := Parse([]byte(minimalAuthorities+"  - name: b\n    origins: [\"h:2\"]\n    transport: sotw\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		want   Authority
		wantOK bool
	}{
		{name: "a", want: Authority{Name: "a", Origins: []string{"h:1"}, Transport: xdstype.TransportDelta, GlobCollections: GlobNative}, wantOK: true},
		{name: "b", want: Authority{Name: "b", Origins: []string{"h:2"}, Transport: xdstype.TransportSotW, GlobCollections: GlobEmulated}, wantOK: true},
		{name: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.Authority(tt.name)
			if ok != tt.wantOK {
				t.Fatalf("Authority(%q) ok = %v, want %v", tt.name, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]string{"a", "b"}, c.AuthorityNames()); diff != "" {
		t.Errorf("AuthorityNames (-want +got):\n%s", diff)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  FieldError
		want string
	}{
		{name: "full", err: FieldError{Source: "r.yaml", Path: "listen", Line: 3, Problem: "bad"}, want: "r.yaml: listen (line 3): bad"},
		{name: "no line", err: FieldError{Source: "r.yaml", Path: "listen", Problem: "bad"}, want: "r.yaml: listen: bad"},
		{name: "in code", err: FieldError{Path: "listen", Problem: "bad"}, want: "listen: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !strings.Contains(tt.want, tt.err.Problem) {
				t.Errorf("lost the problem text")
			}
		})
	}
}

func TestProblemsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("authorities:\n")
	for range 150 {
		b.WriteString("  - {name: \"\", origins: [\"h:1\"]}\n")
	}
	_, err := Parse([]byte(b.String()), "big.yaml")
	if got := len(Problems(err)); got != maxProblems {
		t.Errorf("%d problems reported, want %d", got, maxProblems)
	}
	lines := strings.Split(err.Error(), "\n")
	if last, want := lines[len(lines)-1], "big.yaml: 50 more problems not shown: invalid config"; last != want {
		t.Errorf("last line = %q, want %q", last, want)
	}
}
