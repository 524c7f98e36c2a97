package creds

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-relay/xds-relay/config"
)

// writePair writes a fresh self-signed certificate named cn and its key to
// certFile and keyFile, stamped with mtime.
func writePair(t *testing.T, certFile, keyFile, cn string, mtime time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: der},
		keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		// Explicit, distinct mtimes: file systems with coarse timestamps
		// would otherwise hide a rewrite within the same tick.
		if err := os.Chtimes(file, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func commonName(t *testing.T, c *tls.Certificate) string {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	base := time.Now().Add(-time.Hour)
	writePair(t, certFile, keyFile, "first", base)

	var reported []error // appended by onError, called synchronously by GetCertificate
	server, err := ServerTLSConfig(config.ServerTLS{CertFile: certFile, KeyFile: keyFile}, func(err error) { reported = append(reported, err) })
	if err != nil {
		t.Fatal(err)
	}
	client, err := ClientTLSConfig(config.ClientTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serverCN := func() string {
		c, err := server.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return commonName(t, c)
	}
	clientCN := func() string {
		c, err := client.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return commonName(t, c)
	}

	steps := []struct {
		name       string
		do         func()
		wantCN     string
		wantReport string // substring of the latest report; "" for none new
	}{
		{name: "initial pair", do: func() {}, wantCN: "first"},
		{name: "rotated pair", do: func() { writePair(t, certFile, keyFile, "second", base.Add(time.Minute)) }, wantCN: "second"},
		{name: "half-written pair keeps the previous", do: func() {
			if err := os.WriteFile(certFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(certFile, base.Add(2*time.Minute), base.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}, wantCN: "second", wantReport: "reload"},
		{name: "removed files keep the previous", do: func() {
			if err := os.Remove(keyFile); err != nil {
				t.Fatal(err)
			}
		}, wantCN: "second", wantReport: "no such file"},
		{name: "third pair", do: func() { writePair(t, certFile, keyFile, "third", base.Add(3*time.Minute)) }, wantCN: "third"},
	}
	for _, s := range steps {
		before := len(reported)
		s.do()
		if got := serverCN(); got != s.wantCN {
			t.Errorf("%s: server certificate %q, want %q", s.name, got, s.wantCN)
		}
		if got := clientCN(); got != s.wantCN {
			t.Errorf("%s: client certificate %q, want %q", s.name, got, s.wantCN)
		}
		switch {
		case s.wantReport == "" && len(reported) != before:
			t.Errorf("%s: unexpected report %v", s.name, reported[len(reported)-1])
		case s.wantReport != "" && (len(reported) == before || !strings.Contains(reported[len(reported)-1].Error(), s.wantReport)):
			t.Errorf("%s: reports %v, want a new one containing %q", s.name, reported[before:], s.wantReport)
		}
	}
}
