package creds

import (
	"crypto/tls"
	"fmt"

	"github.com/xds-relay/xds-relay/config"
)

// ServerTLSConfig builds the downstream listener's TLS configuration from
// downstream.tls; nil when TLS is off. The certificate pair and the CA
// file are read now (an error if they do not load) and again whenever
// their files change, so rotated certificates and CAs need no restart:
// each new connection gets the current ones (GetCertificate,
// GetConfigForClient), open connections are kept. onError (may be nil)
// hears of a changed file that fails to load, while the previous pair or
// pool stays in use.
func ServerTLSConfig(t config.ServerTLS, onError func(error)) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	certs, err := newRotatingCertificate(t.CertFile, t.KeyFile, onError)
	if err != nil {
		return nil, fmt.Errorf("downstream.tls: load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{GetCertificate: certs.getCertificate, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		cas, err := newRotatingCA(t.CAFile, onError)
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

// RotatingClientTLS hands out the TLS configuration toward origins as it
// is now: Config re-reads the CA file when it changed (the client
// certificate pair is re-read by the config's GetClientCertificate at each
// handshake). Build one per connection attempt; safe for concurrent use.
type RotatingClientTLS struct {
	serverName string               // read-only after NewRotatingClientTLS
	cas        *rotatingCA          // nil: system roots; read-only after NewRotatingClientTLS
	certs      *rotatingCertificate // nil: no client certificate; read-only after NewRotatingClientTLS
}

// NewRotatingClientTLS reads the CA file and the client certificate pair
// of t (upstream.tls, or an authority's tls) now (an error if they do not
// load) and returns what builds each handshake's config; nil when TLS is
// off. onError (may be nil) hears of a changed file that fails to load,
// while the previous pair or pool stays in use.
func NewRotatingClientTLS(t config.ClientTLS, onError func(error)) (*RotatingClientTLS, error) {
	if !t.Enabled {
		return nil, nil
	}
	s := &RotatingClientTLS{serverName: t.ServerName}
	if t.CAFile != "" {
		cas, err := newRotatingCA(t.CAFile, onError)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls.ca_file: %w", unwrapPathError(err))
		}
		s.cas = cas
	}
	if t.CertFile != "" || t.KeyFile != "" {
		certs, err := newRotatingCertificate(t.CertFile, t.KeyFile, onError)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls: load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		s.certs = certs
	}
	return s, nil
}

// Config is a new TLS configuration with the CA pool as it is now.
// ServerName, when set, overrides the dialled host.
func (s *RotatingClientTLS) Config() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	if s.cas != nil {
		c.RootCAs = s.cas.current()
	}
	if s.certs != nil {
		c.GetClientCertificate = s.certs.getClientCertificate
	}
	return c
}

// ClientTLSConfig builds one TLS configuration for connections to origins;
// nil when TLS is off. Its CA pool is the file's as read now; use
// NewRotatingClientTLS for one that follows the file.
func ClientTLSConfig(t config.ClientTLS, onError func(error)) (*tls.Config, error) {
	s, err := NewRotatingClientTLS(t, onError)
	if s == nil || err != nil {
		return nil, err
	}
	return s.Config(), nil
}
