package config

import (
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// caReloader serves a CA pool read from a PEM file, and reads it again
// when the file's modification time or size changes, so that new
// connections verify against a rotated CA without a restart (connections
// already verified are not touched). A file that fails to load (say, a
// half-written one, or one without certificates) is reported to onError
// and the previous pool stays in use.
type caReloader struct {
	file    string      // read-only after newCAReloader
	onError func(error) // read-only after newCAReloader; may be nil

	mu   sync.Mutex     // guards the fields below; never held during I/O
	pool *x509.CertPool // guarded by mu
	mod  time.Time      // guarded by mu: file's mtime when pool was read
	size int64          // guarded by mu: file's size when pool was read
}

// newCAReloader reads the file now: a file that does not load is an error.
func newCAReloader(file string, onError func(error)) (*caReloader, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	pool, err := loadPool(file)
	if err != nil {
		return nil, err
	}
	return &caReloader{file: file, onError: onError, pool: pool, mod: fi.ModTime(), size: fi.Size()}, nil
}

// current returns the pool, re-reading the file if it changed.
func (r *caReloader) current() *x509.CertPool {
	fi, statErr := os.Stat(r.file)
	r.mu.Lock()
	pool := r.pool
	changed := statErr == nil && (!fi.ModTime().Equal(r.mod) || fi.Size() != r.size)
	r.mu.Unlock()
	if statErr != nil {
		r.report(fmt.Errorf("TLS CA file %s: %w; keeping the loaded one", r.file, statErr))
		return pool
	}
	if !changed {
		return pool
	}
	fresh, err := loadPool(r.file)
	if err != nil {
		r.report(fmt.Errorf("TLS CA file %s: reload: %w; keeping the loaded one", r.file, err))
		return pool
	}
	r.mu.Lock()
	r.pool, r.mod, r.size = fresh, fi.ModTime(), fi.Size()
	r.mu.Unlock()
	return fresh
}

func (r *caReloader) report(err error) {
	if r.onError != nil {
		r.onError(err)
	}
}
