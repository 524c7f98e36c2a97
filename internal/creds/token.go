package creds

import (
	"fmt"

	"github.com/xds-relay/xds-relay/config"
)

// RotatingToken serves the bearer token in a file (config.ReadBearerToken,
// the check config's validation makes), read again when the file changes
// (rotating), so a rotated token is sent on the next stream without a
// restart. A file that no longer reads is reported to onError (never with
// the token) and the previous token stays in use. Safe for concurrent use.
type RotatingToken struct {
	file string            // read-only after NewRotatingToken
	tok  *rotating[string] // read-only after NewRotatingToken
}

// NewRotatingToken reads the token now: a file without a usable token is
// an error.
func NewRotatingToken(file string, onError func(error)) (*RotatingToken, error) {
	tok, err := newRotating([]string{file}, func() (string, error) { return config.ReadBearerToken(file) }, onError,
		func(err error, loaded bool) error {
			if !loaded {
				return fmt.Errorf("%w: %w", config.ErrBadToken, unwrapPathError(err))
			}
			return fmt.Errorf("%w: %w; keeping the loaded token", config.ErrBadToken, unwrapPathError(err))
		},
		func(err error) error { return fmt.Errorf("reload: %w; keeping the loaded token", err) })
	if err != nil {
		return nil, err
	}
	return &RotatingToken{file: file, tok: tok}, nil
}

// Token returns the token, re-reading the file if it changed.
func (s *RotatingToken) Token() string { return s.tok.current() }

// File is the token file's name (safe to show; the token is not).
func (s *RotatingToken) File() string { return s.file }
