package config

import "strings"

// authorityUpstream checks authority a's own tls and bearer token (at
// path p, "authorities[i]"), and that the token that applies to it, its
// own or upstream's, does not go out in plaintext unless allowed.
func (v *validator) authorityUpstream(p string, a Authority) {
	if a.TLS != nil {
		v.clientTLS(p+".tls", *a.TLS)
	}
	v.bearerToken(p+".bearer_token_file", a.BearerTokenFile)
	tokenPath := p + ".bearer_token_file"
	if a.BearerTokenFile == "" {
		tokenPath = "upstream.bearer_token_file"
	}
	if v.c.BearerTokenFile(a) == "" || v.c.UpstreamTLS(a).Enabled || v.c.Upstream.AllowPlaintextBearerToken || !hasControlPlane(a) {
		return
	}
	tlsPath := "upstream.tls.enabled"
	if a.TLS != nil {
		tlsPath = p + ".tls.enabled"
	}
	v.add(tokenPath, "authority %q would send its bearer token without TLS (%s is false); enable TLS, or set upstream.allow_plaintext_bearer_token", a.Name, tlsPath)
}

// bearerToken checks that a configured token file (if any) holds a usable
// token. The problem never shows the token.
func (v *validator) bearerToken(path, file string) {
	if file == "" {
		return
	}
	if _, err := ReadBearerToken(file); err != nil {
		v.add(path, "%v", err)
	}
}

// hasControlPlane reports whether a has an origin that is not a file source
// (TLS and tokens apply only to those).
func hasControlPlane(a Authority) bool {
	for _, o := range a.Origins {
		if !strings.HasPrefix(o, FileOriginPrefix) {
			return true
		}
	}
	return false
}
