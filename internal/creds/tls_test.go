package creds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/config"
)

// Working certificates are exercised end to end by internal/relay's TLS
// tests; these cover the switches and the errors.
func TestTLSConfig(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		build   func() (bool, error) // (config returned, error)
		wantCfg bool
		wantErr string
	}{
		{name: "server off", build: func() (bool, error) { c, err := ServerTLSConfig(config.ServerTLS{}, nil); return c != nil, err }},
		{name: "server bad pair", build: func() (bool, error) {
			c, err := ServerTLSConfig(config.ServerTLS{CertFile: garbage, KeyFile: garbage}, nil)
			return c != nil, err
		}, wantErr: "downstream.tls: load cert_file " + garbage},
		{name: "client off", build: func() (bool, error) { c, err := ClientTLSConfig(config.ClientTLS{}, nil); return c != nil, err }},
		{name: "client system roots", build: func() (bool, error) {
			c, err := ClientTLSConfig(config.ClientTLS{Enabled: true, ServerName: "origin.example"}, nil)
			return c != nil && c.RootCAs == nil && c.ServerName == "origin.example", err
		}, wantCfg: true},
		{name: "client bad CA", build: func() (bool, error) {
			c, err := ClientTLSConfig(config.ClientTLS{Enabled: true, CAFile: garbage}, nil)
			return c != nil, err
		}, wantErr: "upstream.tls.ca_file: " + garbage + ": no PEM certificates"},
		{name: "client bad pair", build: func() (bool, error) {
			c, err := ClientTLSConfig(config.ClientTLS{Enabled: true, CertFile: garbage, KeyFile: garbage}, nil)
			return c != nil, err
		}, wantErr: "upstream.tls: load cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotCfg, err := tt.build()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || gotCfg != tt.wantCfg {
				t.Errorf("config as expected = %v, err %v; want %v", gotCfg, err, tt.wantCfg)
			}
		})
	}
}
