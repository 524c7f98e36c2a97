package creds

import (
	"google.golang.org/grpc/credentials"

	"github.com/xds-relay/xds-relay/config"
)

// Origins hands out the credentials toward origins, one value per distinct
// TLS setting and per token file, so that authorities with equal settings
// share one value (hence the connections to an origin they have in
// common), and a config reload hands an authority whose settings did not
// change the very value it had (its links are not restarted). Files of a
// setting seen for the first time are read then (an error if they do not
// load) and followed afterwards: a rotated CA, client certificate or token
// is used by the next connection or stream. Not safe for concurrent use:
// the relay uses it from New and from reloads, which are serialised.
type Origins struct {
	onError func(error) // read-only after NewOrigins; may be nil
	tls     map[config.ClientTLS]credentials.TransportCredentials
	tokens  map[string]credentials.PerRPCCredentials
}

// NewOrigins returns an empty set. onError (may be nil) hears of a rotated
// file that does not load (the previous value stays in use); its errors
// name files, never a token.
func NewOrigins(onError func(error)) *Origins {
	return &Origins{
		onError: onError,
		tls:     map[config.ClientTLS]credentials.TransportCredentials{},
		tokens:  map[string]credentials.PerRPCCredentials{},
	}
}

// TLS returns the transport credentials of t (enabled), built the first
// time t is seen.
func (o *Origins) TLS(t config.ClientTLS) (credentials.TransportCredentials, error) {
	if c, ok := o.tls[t]; ok {
		return c, nil
	}
	src, err := NewRotatingClientTLS(t, o.onError)
	if err != nil {
		return nil, err
	}
	c := TLSCredentials(src.Config)
	o.tls[t] = c
	return c, nil
}

// Token returns the per-stream credentials of the token in file, built the
// first time file is seen (allowPlaintext as it was then).
func (o *Origins) Token(file string, allowPlaintext bool) (credentials.PerRPCCredentials, error) {
	if p, ok := o.tokens[file]; ok {
		return p, nil
	}
	src, err := NewRotatingToken(file, o.onError)
	if err != nil {
		return nil, err
	}
	p := BearerCredentials(src.Token, allowPlaintext)
	o.tokens[file] = p
	return p, nil
}
