package creds

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// TLSCredentials are transport credentials toward origins whose TLS
// configuration is config() as it is at each handshake: a CA or client
// certificate rotated on disk is used by the next connection, while open
// connections (and the streams on them) are kept. config must return a
// new *tls.Config each call (RotatingClientTLS.Config does); the
// handshake itself is grpc's TLS credentials', so the dialled host is
// verified unless the config sets ServerName.
func TLSCredentials(config func() *tls.Config) credentials.TransportCredentials {
	return &rotatingTLS{config: config, info: credentials.NewTLS(&tls.Config{}).Info()}
}

type rotatingTLS struct {
	config func() *tls.Config       // read-only
	info   credentials.ProtocolInfo // read-only
}

func (c *rotatingTLS) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.config()).ClientHandshake(ctx, authority, raw)
}

func (c *rotatingTLS) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("upstream: TLSCredentials are for dialling origins, not for serving")
}

func (c *rotatingTLS) Info() credentials.ProtocolInfo { return c.info }

func (c *rotatingTLS) Clone() credentials.TransportCredentials {
	return &rotatingTLS{config: c.config, info: c.info}
}

// OverrideServerName is deprecated in grpc and unused: set ServerName in
// the config instead.
func (c *rotatingTLS) OverrideServerName(string) error {
	return errors.New("upstream: TLSCredentials: set the server name in the TLS config")
}

// BearerCredentials are per-RPC credentials that send "authorization:
// Bearer <token()>" on each stream to an origin; token is called once per
// stream (RotatingToken.Token re-reads a rotated file). Unless
// allowPlaintext, grpc refuses to send them over a connection without
// transport security ("cannot send secure credentials on an insecure
// connection"), so a token never leaves in plaintext by mistake.
func BearerCredentials(token func() string, allowPlaintext bool) credentials.PerRPCCredentials {
	return &bearer{token: token, allowPlaintext: allowPlaintext}
}

type bearer struct {
	token          func() string // read-only
	allowPlaintext bool          // read-only
}

func (b *bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token()}, nil
}

func (b *bearer) RequireTransportSecurity() bool { return !b.allowPlaintext }
