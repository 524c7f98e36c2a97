package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig builds the downstream listener's TLS configuration; nil when TLS
// is off. The certificate pair and the CA file are read now (an error if
// they do not load) and again whenever their files change, so rotated
// certificates and CAs need no restart: each new connection gets the
// current ones (GetCertificate, GetConfigForClient), open connections are
// kept. onError (may be nil) hears of a changed file that fails to load,
// while the previous pair or pool stays in use.
func (t ServerTLS) TLSConfig(onError func(error)) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	certs, err := newCertReloader(t.CertFile, t.KeyFile, onError)
	if err != nil {
		return nil, fmt.Errorf("downstream.tls: load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{GetCertificate: certs.getCertificate, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		cas, err := newCAReloader(t.CAFile, onError)
		if err != nil {
			return nil, fmt.Errorf("downstream.tls.ca_file: %w", unwrapPathError(err))
		}
		c.ClientCAs = cas.current()
		c.ClientAuth = tls.RequireAndVerifyClientCert
		// Each handshake verifies against the pool as it is now. The
		// config returned replaces c for that connection (grpc adds its
		// ALPN to it).
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{
				GetCertificate: certs.getCertificate,
				MinVersion:     tls.VersionTLS12,
				ClientCAs:      cas.current(),
				ClientAuth:     tls.RequireAndVerifyClientCert,
			}, nil
		}
	}
	return c, nil
}

// ClientTLSSource hands out the TLS configuration toward origins as it is
// now: Config re-reads the CA file when it changed (the client certificate
// pair is re-read by the config's GetClientCertificate at each handshake).
// Build one per connection attempt; safe for concurrent use.
type ClientTLSSource struct {
	serverName string        // read-only after Source
	cas        *caReloader   // nil: system roots; read-only after Source
	certs      *certReloader // nil: no client certificate; read-only after Source
}

// Source reads the CA file and the client certificate pair now (an error
// if they do not load) and returns what builds each handshake's config;
// nil when TLS is off. onError (may be nil) hears of a changed file that
// fails to load, while the previous pair or pool stays in use.
func (t ClientTLS) Source(onError func(error)) (*ClientTLSSource, error) {
	if !t.Enabled {
		return nil, nil
	}
	s := &ClientTLSSource{serverName: t.ServerName}
	if t.CAFile != "" {
		cas, err := newCAReloader(t.CAFile, onError)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls.ca_file: %w", unwrapPathError(err))
		}
		s.cas = cas
	}
	if t.CertFile != "" || t.KeyFile != "" {
		certs, err := newCertReloader(t.CertFile, t.KeyFile, onError)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls: load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		s.certs = certs
	}
	return s, nil
}

// Config is a new TLS configuration with the CA pool as it is now.
// ServerName, when set, overrides the dialled host.
func (s *ClientTLSSource) Config() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	if s.cas != nil {
		c.RootCAs = s.cas.current()
	}
	if s.certs != nil {
		c.GetClientCertificate = s.certs.getClientCertificate
	}
	return c
}

// TLSConfig builds one TLS configuration for connections to origins; nil
// when TLS is off. Its CA pool is the file's as read now; use Source for
// one that follows the file.
func (t ClientTLS) TLSConfig(onError func(error)) (*tls.Config, error) {
	s, err := t.Source(onError)
	if s == nil || err != nil {
		return nil, err
	}
	return s.Config(), nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates", file)
	}
	return pool, nil
}
