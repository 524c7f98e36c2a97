package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig builds the downstream listener's TLS configuration; nil when TLS
// is off. The certificate pair is read now (an error if it does not load)
// and again whenever its files change, so rotated certificates need no
// restart; onError (may be nil) hears of a changed pair that fails to load,
// while the previous one stays in use. CA files are read once.
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
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("downstream.tls.ca_file: %w", err)
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// TLSConfig builds the TLS configuration for connections to origins; nil
// when TLS is off. ServerName, when set, overrides the dialled host. A
// client certificate pair is re-read when its files change, as for
// ServerTLS.TLSConfig.
func (t ClientTLS) TLSConfig(onError func(error)) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls.ca_file: %w", err)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		certs, err := newCertReloader(t.CertFile, t.KeyFile, onError)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls: load cert_file %s and key_file %s: %w", t.CertFile, t.KeyFile, err)
		}
		c.GetClientCertificate = certs.getClientCertificate
	}
	return c, nil
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
