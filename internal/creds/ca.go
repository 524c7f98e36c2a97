package creds

import (
	"crypto/x509"
	"fmt"
	"os"
)

// rotatingCA serves a CA pool read from a PEM file, read again when the
// file changes (rotating), so new connections verify against a rotated
// CA without a restart; connections already verified are not touched.
type rotatingCA = rotating[*x509.CertPool]

// newRotatingCA reads the file now: a file that does not load is an error.
func newRotatingCA(file string, onError func(error)) (*rotatingCA, error) {
	statFailed, loadFailed := keepingLoaded("TLS CA file " + file)
	return newRotating([]string{file}, func() (*x509.CertPool, error) { return loadPool(file) }, onError, statFailed, loadFailed)
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
