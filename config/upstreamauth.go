package config

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxBearerTokenSize bounds a bearer token file (a token is a header value;
// origins refuse headers much smaller than this).
const MaxBearerTokenSize = 16 * 1024

// UpstreamTLS is the TLS that applies to authority a's origins: its own
// tls block, or upstream.tls when it has none.
func (c *Config) UpstreamTLS(a Authority) ClientTLS {
	if a.TLS != nil {
		return *a.TLS
	}
	return c.Upstream.TLS
}

// BearerTokenFile is the token file that applies to authority a's origins:
// its own, or upstream.bearer_token_file; "" for none.
func (c *Config) BearerTokenFile(a Authority) string {
	if a.BearerTokenFile != "" {
		return a.BearerTokenFile
	}
	return c.Upstream.BearerTokenFile
}

// ReadBearerToken reads the token in file: at most MaxBearerTokenSize
// bytes, white space around it trimmed, not empty, and only the characters
// RFC 6750 allows in a bearer token (visible ASCII, no spaces), so it
// cannot break the header it goes into. Errors name the file, never the
// token. Validate checks a configured file with it; internal/creds reads a
// rotated file with it too.
func ReadBearerToken(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadToken, unwrapPathError(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBearerTokenSize+1))
	if err != nil {
		return "", fmt.Errorf("%w %s: read: %w", ErrBadToken, file, err)
	}
	if len(b) > MaxBearerTokenSize {
		return "", fmt.Errorf("%w %s: larger than %d bytes", ErrBadToken, file, MaxBearerTokenSize)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%w %s: empty", ErrBadToken, file)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return "", fmt.Errorf("%w %s: byte %d is not a visible ASCII character (allowed in a bearer token)", ErrBadToken, file, i)
		}
	}
	return tok, nil
}
