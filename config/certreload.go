package config

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloader serves a certificate pair read from files, and reads them
// again when either file's modification time changes, so that rotated
// certificates are used by new connections without a restart. A pair that
// fails to load (say, a half-written file) is reported to onError and the
// previous pair stays in use.
type certReloader struct {
	certFile, keyFile string      // read-only after newCertReloader
	onError           func(error) // read-only after newCertReloader; may be nil

	mu      sync.Mutex       // guards the fields below; never held during I/O
	cert    *tls.Certificate // guarded by mu
	certMod time.Time        // guarded by mu: certFile's mtime when cert was read
	keyMod  time.Time        // guarded by mu: keyFile's mtime when cert was read
}

// newCertReloader reads the pair now: a pair that does not load is an error.
func newCertReloader(certFile, keyFile string, onError func(error)) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, onError: onError}
	certMod, keyMod, err := r.mtimes()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.certMod, r.keyMod = &cert, certMod, keyMod
	return r, nil
}

func (r *certReloader) mtimes() (certMod, keyMod time.Time, err error) {
	ci, err := os.Stat(r.certFile)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	ki, err := os.Stat(r.keyFile)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	return ci.ModTime(), ki.ModTime(), nil
}

// current returns the pair, re-reading the files if they changed.
func (r *certReloader) current() *tls.Certificate {
	certMod, keyMod, statErr := r.mtimes()
	r.mu.Lock()
	cert, changed := r.cert, statErr == nil && (!certMod.Equal(r.certMod) || !keyMod.Equal(r.keyMod))
	r.mu.Unlock()
	if statErr != nil {
		r.report(fmt.Errorf("TLS certificate %s: %w; keeping the loaded one", r.certFile, statErr))
		return cert
	}
	if !changed {
		return cert
	}
	fresh, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.report(fmt.Errorf("TLS certificate %s: reload: %w; keeping the loaded one", r.certFile, err))
		return cert
	}
	r.mu.Lock()
	r.cert, r.certMod, r.keyMod = &fresh, certMod, keyMod
	r.mu.Unlock()
	return &fresh
}

func (r *certReloader) report(err error) {
	if r.onError != nil {
		r.onError(err)
	}
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current(), nil
}

func (r *certReloader) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.current(), nil
}
