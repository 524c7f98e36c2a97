package creds

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-relay/xds-relay/config"
)

// TestCAReload: the downstream listener's client CA and the upstream root
// CA follow their file: each new handshake's config has the pool as the
// file is now; a file that does not load is reported and the previous pool
// kept.
func TestCAReload(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	base := time.Now().Add(-time.Hour)
	writePair(t, certFile, keyFile, "server", base)
	// writeCA writes a fresh self-signed certificate as the CA file and
	// returns the pool it makes.
	writeCA := func(cn string, mtime time.Time) *x509.CertPool {
		writePair(t, caFile, filepath.Join(dir, "ca-key.pem"), cn, mtime)
		pool, err := loadPool(caFile)
		if err != nil {
			t.Fatal(err)
		}
		return pool
	}
	want := writeCA("first", base)

	var reported []error // appended by onError, called synchronously
	onError := func(err error) { reported = append(reported, err) }
	server, err := ServerTLSConfig(config.ServerTLS{CertFile: certFile, KeyFile: keyFile, CAFile: caFile}, onError)
	if err != nil {
		t.Fatal(err)
	}
	client, err := NewRotatingClientTLS(config.ClientTLS{Enabled: true, CAFile: caFile}, onError)
	if err != nil {
		t.Fatal(err)
	}
	serverPool := func() *x509.CertPool {
		c, err := server.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if c.ClientAuth != tls.RequireAndVerifyClientCert || c.GetCertificate == nil {
			t.Fatalf("per-connection config lost client auth or the certificate: %+v", c)
		}
		return c.ClientCAs
	}

	steps := []struct {
		name       string
		do         func()
		wantReport string // substring of the latest report; "" for none new
	}{
		{name: "initial CA", do: func() {}},
		{name: "rotated CA", do: func() { want = writeCA("second", base.Add(time.Minute)) }},
		{name: "half-written CA keeps the previous", do: func() {
			if err := os.WriteFile(caFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantReport: "reload"},
		{name: "removed CA keeps the previous", do: func() {
			if err := os.Remove(caFile); err != nil {
				t.Fatal(err)
			}
		}, wantReport: "no such file"},
		{name: "third CA", do: func() { want = writeCA("third", base.Add(3*time.Minute)) }},
	}
	for _, s := range steps {
		before := len(reported)
		s.do()
		if !serverPool().Equal(want) {
			t.Errorf("%s: downstream client CA pool is not the expected one", s.name)
		}
		if !client.Config().RootCAs.Equal(want) {
			t.Errorf("%s: upstream root CA pool is not the expected one", s.name)
		}
		switch {
		case s.wantReport == "" && len(reported) != before:
			t.Errorf("%s: unexpected report %v", s.name, reported[len(reported)-1])
		case s.wantReport != "" && (len(reported) == before || !strings.Contains(reported[len(reported)-1].Error(), s.wantReport)):
			t.Errorf("%s: reports %v, want a new one containing %q", s.name, reported[before:], s.wantReport)
		}
	}
}
