package config

import (
	"crypto/x509"
	"fmt"
)

// caReloader serves a CA pool read from a PEM file, read again when the
// file changes (fileValue), so new connections verify against a rotated
// CA without a restart; connections already verified are not touched.
type caReloader = fileValue[*x509.CertPool]

// newCAReloader reads the file now: a file that does not load is an error.
func newCAReloader(file string, onError func(error)) (*caReloader, error) {
	return newFileValue([]string{file}, func() (*x509.CertPool, error) { return loadPool(file) }, onError,
		func(err error, loaded bool) error {
			if !loaded {
				return err
			}
			return fmt.Errorf("TLS CA file %s: %w; keeping the loaded one", file, err)
		},
		func(err error) error {
			return fmt.Errorf("TLS CA file %s: reload: %w; keeping the loaded one", file, err)
		})
}
