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
	statFailed, loadFailed := keepingLoaded("TLS certificate " + certFile)
	f, err := newRotating([]string{certFile, keyFile}, load, onError, statFailed, loadFailed)
	if err != nil {
		return nil, err
	}
	return &rotatingCertificate{f}, nil
}

// keepingLoaded makes a TLS file's errors for rotating, named what ("TLS
// CA file ca.pem"): at build time a file that does not stat is that error
// as is; later, the error says the value loaded before stays in use.
func keepingLoaded(what string) (statFailed func(err error, loaded bool) error, loadFailed func(error) error) {
	statFailed = func(err error, loaded bool) error {
		if !loaded {
			return err
		}
		return fmt.Errorf("%s: %w; keeping the loaded one", what, err)
	}
	loadFailed = func(err error) error {
		return fmt.Errorf("%s: reload: %w; keeping the loaded one", what, err)
	}
	return statFailed, loadFailed
}

func (r *rotatingCertificate) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current(), nil
}

func (r *rotatingCertificate) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.current(), nil
}
