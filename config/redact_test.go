package config

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRedactNode: secret-looking values are hidden wherever they are;
// paths to secrets, access patterns and ordinary values are shown.
func TestRedactNode(t *testing.T) {
	const in = `
upstream:
  bearer_token_file: /etc/relay/token
  bearer_token: s3cr3t-token
  tls:
    key_file: /etc/relay/tls.key
    private_key: inline-key-material
    password: hunter2
  headers:
    authorization: Bearer abc.def
  api_key: {value: k-123, nested: [n-1, n-2]}
  timeout_token_count: 3
authorities:
  - name: a
    origins: ["https://ops:pa55@origin.example:443", "plain.example:443"]
    allow_by_type:
      type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret:
        - uri_san: "spiffe://fleet.example/ns/prod/sa/gateway"
inline_cert: |
  -----BEGIN PRIVATE KEY-----
  MIIB
  -----END PRIVATE KEY-----
`
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(in), &n); err != nil {
		t.Fatal(err)
	}
	redactNode(&n, false)
	outb, err := yaml.Marshal(&n)
	if err != nil {
		t.Fatal(err)
	}
	out := string(outb)
	for _, secret := range []string{"s3cr3t-token", "inline-key-material", "hunter2", "abc.def", "k-123", "n-1", "n-2", "pa55", "MIIB", "BEGIN PRIVATE"} {
		if strings.Contains(out, secret) {
			t.Errorf("redacted output shows %q:\n%s", secret, out)
		}
	}
	for _, shown := range []string{
		"bearer_token_file: /etc/relay/token", "key_file: /etc/relay/tls.key", "timeout_token_count: 3",
		"https://ops:<redacted>@origin.example:443", "plain.example:443",
		"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret:",
		"spiffe://fleet.example/ns/prod/sa/gateway", "bearer_token: <redacted>",
	} {
		if !strings.Contains(out, shown) {
			t.Errorf("redacted output lacks %q:\n%s", shown, out)
		}
	}
}

// TestRedacted: the running config comes out with its keys and values,
// TLS file paths included, as YAML and as JSON.
func TestRedacted(t *testing.T) {
	c := Default()
	c.Authorities = []Authority{{Name: "auth.example", Origins: []string{"127.0.0.1:19000"}}}
	c.Upstream.TLS = ClientTLS{Enabled: true, CAFile: "/etc/ca.pem", CertFile: "/etc/relay.pem", KeyFile: "/etc/relay.key"}
	y, err := Redacted(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: auth.example", "key_file: /etc/relay.key", "send_timeout: 30s", "max_bytes: 256MiB", "listen: 127.0.0.1:18000"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("YAML lacks %q:\n%s", want, y)
		}
	}
	j, err := RedactedJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Authorities []struct{ Name string } `json:"authorities"`
		Upstream    struct {
			TLS struct {
				KeyFile string `json:"key_file"`
			} `json:"tls"`
		} `json:"upstream"`
	}
	if err := json.Unmarshal(j, &v); err != nil {
		t.Fatalf("%v:\n%s", err, j)
	}
	if len(v.Authorities) != 1 || v.Authorities[0].Name != "auth.example" || v.Upstream.TLS.KeyFile != "/etc/relay.key" {
		t.Errorf("JSON: %+v", v)
	}
}
