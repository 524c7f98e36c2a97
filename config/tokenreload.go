package config

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// BearerTokenSource serves the bearer token in a file (ReadBearerToken),
// and reads it again when the file's modification time or size changes,
// so a rotated token is sent on the next stream without a restart. A file
// that no longer reads is reported to onError (never with the token) and
// the previous token stays in use. Safe for concurrent use.
type BearerTokenSource struct {
	file    string      // read-only after NewBearerTokenSource
	onError func(error) // read-only after NewBearerTokenSource; may be nil

	mu    sync.Mutex // guards the fields below; never held during I/O
	token string     // guarded by mu
	mod   time.Time  // guarded by mu: file's mtime when token was read
	size  int64      // guarded by mu: file's size when token was read
}

// NewBearerTokenSource reads the token now: a file without a usable token
// is an error.
func NewBearerTokenSource(file string, onError func(error)) (*BearerTokenSource, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadToken, unwrapPathError(err))
	}
	tok, err := ReadBearerToken(file)
	if err != nil {
		return nil, err
	}
	return &BearerTokenSource{file: file, onError: onError, token: tok, mod: fi.ModTime(), size: fi.Size()}, nil
}

// Token returns the token, re-reading the file if it changed.
func (s *BearerTokenSource) Token() string {
	fi, statErr := os.Stat(s.file)
	s.mu.Lock()
	tok := s.token
	changed := statErr == nil && (!fi.ModTime().Equal(s.mod) || fi.Size() != s.size)
	s.mu.Unlock()
	if statErr != nil {
		s.report(fmt.Errorf("%w: %w; keeping the loaded token", ErrBadToken, unwrapPathError(statErr)))
		return tok
	}
	if !changed {
		return tok
	}
	fresh, err := ReadBearerToken(s.file)
	if err != nil {
		s.report(fmt.Errorf("reload: %w; keeping the loaded token", err))
		return tok
	}
	s.mu.Lock()
	s.token, s.mod, s.size = fresh, fi.ModTime(), fi.Size()
	s.mu.Unlock()
	return fresh
}

// File is the token file's name (safe to show; the token is not).
func (s *BearerTokenSource) File() string { return s.file }

func (s *BearerTokenSource) report(err error) {
	if s.onError != nil {
		s.onError(err)
	}
}
