package config

import "fmt"

// BearerTokenSource serves the bearer token in a file (ReadBearerToken),
// read again when the file changes (fileValue), so a rotated token is sent
// on the next stream without a restart. A file that no longer reads is
// reported to onError (never with the token) and the previous token stays
// in use. Safe for concurrent use.
type BearerTokenSource struct {
	file string             // read-only after NewBearerTokenSource
	tok  *fileValue[string] // read-only after NewBearerTokenSource
}

// NewBearerTokenSource reads the token now: a file without a usable token
// is an error.
func NewBearerTokenSource(file string, onError func(error)) (*BearerTokenSource, error) {
	tok, err := newFileValue([]string{file}, func() (string, error) { return ReadBearerToken(file) }, onError,
		func(err error, loaded bool) error {
			if !loaded {
				return fmt.Errorf("%w: %w", ErrBadToken, unwrapPathError(err))
			}
			return fmt.Errorf("%w: %w; keeping the loaded token", ErrBadToken, unwrapPathError(err))
		},
		func(err error) error { return fmt.Errorf("reload: %w; keeping the loaded token", err) })
	if err != nil {
		return nil, err
	}
	return &BearerTokenSource{file: file, tok: tok}, nil
}

// Token returns the token, re-reading the file if it changed.
func (s *BearerTokenSource) Token() string { return s.tok.current() }

// File is the token file's name (safe to show; the token is not).
func (s *BearerTokenSource) File() string { return s.file }
