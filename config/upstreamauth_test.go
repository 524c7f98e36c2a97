package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateUpstreamAuth(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cert.pem")
	token := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	spaced := filepath.Join(dir, "spaced")
	big := filepath.Join(dir, "big")
	for name, content := range map[string]string{
		file: "not checked here", token: "s3cret-token\n", empty: " \n", spaced: "two words",
		big: strings.Repeat("a", MaxBearerTokenSize+1),
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing")
	tlsOn := "upstream:\n  tls: {enabled: true}\n"
	// Every case is minimalAuthorities (lines 1-3) plus the lines shown.
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "authority tls valid", extra: "    tls: {enabled: true, ca_file: " + file + ", cert_file: " + file + ", key_file: " + file + ", server_name: x}\n"},
		{name: "authority tls cert without key", extra: "    tls:\n      enabled: true\n      cert_file: " + file + "\n",
			want: []problem{{"authorities[0].tls.key_file", 6, "required when cert_file is set"}}},
		{name: "authority tls ca missing", extra: "    tls:\n      enabled: true\n      ca_file: " + missing + "\n",
			want: []problem{{"authorities[0].tls.ca_file", 6, missing + ": no such file or directory"}}},
		{name: "authority tls settings while disabled", extra: "    tls: {ca_file: " + file + "}\n",
			want: []problem{{"authorities[0].tls.enabled", 4, "TLS settings are given but enabled is false"}}},
		{name: "global token with global tls", extra: tlsOn + "  bearer_token_file: " + token + "\n"},
		{name: "authority token with its own tls", extra: "    tls: {enabled: true}\n    bearer_token_file: " + token + "\n"},
		{name: "token over plaintext allowed", extra: "upstream:\n  bearer_token_file: " + token + "\n  allow_plaintext_bearer_token: true\n"},
		{name: "token over plaintext", extra: "upstream:\n  bearer_token_file: " + token + "\n",
			want: []problem{{"upstream.bearer_token_file", 5, `authority "a" would send its bearer token without TLS (upstream.tls.enabled is false)`}}},
		{name: "authority token over its own plaintext", extra: "    tls: {enabled: false}\n    bearer_token_file: " + token + "\n" + tlsOn,
			want: []problem{{"authorities[0].bearer_token_file", 5, `(authorities[0].tls.enabled is false)`}}},
		{name: "token for file origins only needs no tls", extra: "  - name: files\n    origins: [\"file://" + dir + "\"]\n    bearer_token_file: " + token + "\n"},
		{name: "token file missing", extra: tlsOn + "  bearer_token_file: " + missing + "\n",
			want: []problem{{"upstream.bearer_token_file", 6, "bearer token file: " + missing + ": no such file or directory"}}},
		{name: "token file empty", extra: "    bearer_token_file: " + empty + "\n" + tlsOn,
			want: []problem{{"authorities[0].bearer_token_file", 4, "bearer token file " + empty + ": empty"}}},
		{name: "token with a space", extra: tlsOn + "  bearer_token_file: " + spaced + "\n",
			want: []problem{{"upstream.bearer_token_file", 6, "byte 3 is not a visible ASCII character"}}},
		{name: "token too large", extra: tlsOn + "  bearer_token_file: " + big + "\n",
			want: []problem{{"upstream.bearer_token_file", 6, "larger than 16384 bytes"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimalAuthorities+tt.extra), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the token: %v", err)
			}
		})
	}
}

// TestEffectiveUpstreamAuth: an authority's own tls and token replace the
// global ones as a whole; absent, the global ones apply.
func TestEffectiveUpstreamAuth(t *testing.T) {
	own := &ClientTLS{Enabled: true, ServerName: "own"}
	c := Default()
	c.Upstream.TLS = ClientTLS{Enabled: true, CAFile: "global.pem"}
	c.Upstream.BearerTokenFile = "global-token"
	tests := []struct {
		name      string
		a         Authority
		wantTLS   ClientTLS
		wantToken string
	}{
		{name: "global", a: Authority{Name: "g"}, wantTLS: c.Upstream.TLS, wantToken: "global-token"},
		{name: "own", a: Authority{Name: "o", TLS: own, BearerTokenFile: "own-token"}, wantTLS: *own, wantToken: "own-token"},
		{name: "own plaintext", a: Authority{Name: "p", TLS: &ClientTLS{}}, wantTLS: ClientTLS{}, wantToken: "global-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.wantTLS, c.UpstreamTLS(tt.a)); diff != "" {
				t.Errorf("UpstreamTLS (-want +got):\n%s", diff)
			}
			if got := c.BearerTokenFile(tt.a); got != tt.wantToken {
				t.Errorf("BearerTokenFile = %q, want %q", got, tt.wantToken)
			}
		})
	}
}

func TestReadBearerToken(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("\n  abc.DEF-123_~+/=  \r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBearerToken(f)
	if err != nil || got != "abc.DEF-123_~+/=" {
		t.Errorf("ReadBearerToken = %q, %v; want the token trimmed", got, err)
	}
}
