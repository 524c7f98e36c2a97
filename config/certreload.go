package config

import (
	"crypto/tls"
	"fmt"
)

// certReloader serves a certificate pair read from files, read again when
// either file changes (fileValue), so rotated certificates are used by new
// connections without a restart.
type certReloader struct {
	*fileValue[*tls.Certificate]
}

// newCertReloader reads the pair now: a pair that does not load is an error.
func newCertReloader(certFile, keyFile string, onError func(error)) (*certReloader, error) {
	load := func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		return &cert, err
	}
	f, err := newFileValue([]string{certFile, keyFile}, load, onError,
		func(err error, loaded bool) error {
			if !loaded {
				return err
			}
			return fmt.Errorf("TLS certificate %s: %w; keeping the loaded one", certFile, err)
		},
		func(err error) error {
			return fmt.Errorf("TLS certificate %s: reload: %w; keeping the loaded one", certFile, err)
		})
	if err != nil {
		return nil, err
	}
	return &certReloader{f}, nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current(), nil
}

func (r *certReloader) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.current(), nil
}
