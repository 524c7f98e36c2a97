package creds

import (
	"crypto/tls"
	"fmt"
)

// rotatingCertificate serves a certificate pair read from files, read
// again when either file changes (rotating), so rotated certificates are
// used by new connections without a restart.
type rotatingCertificate struct {
	*rotating[*tls.Certificate]
}

// newRotatingCertificate reads the pair now: a pair that does not load is
// an error.
func newRotatingCertificate(certFile, keyFile string, onError func(error)) (*rotatingCertificate, error) {
	load := func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		return &cert, err
	}
	f, err := newRotating([]string{certFile, keyFile}, load, onError,
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
	return &rotatingCertificate{f}, nil
}

func (r *rotatingCertificate) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current(), nil
}

func (r *rotatingCertificate) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.current(), nil
}
