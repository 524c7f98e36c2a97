package creds

import (
	"context"
	"testing"
)

func TestBearerCredentials(t *testing.T) {
	tok := "t-1"
	for _, tc := range []struct {
		name           string
		allowPlaintext bool
	}{
		{name: "TLS required"},
		{name: "plaintext allowed", allowPlaintext: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := BearerCredentials(func() string { return tok }, tc.allowPlaintext)
			if got := b.RequireTransportSecurity(); got == tc.allowPlaintext {
				t.Errorf("RequireTransportSecurity = %v with allowPlaintext %v", got, tc.allowPlaintext)
			}
			for _, want := range []string{"t-1", "t-2"} {
				tok = want // the source is asked again for each stream
				md, err := b.GetRequestMetadata(context.Background())
				if err != nil || md["authorization"] != "Bearer "+want || len(md) != 1 {
					t.Errorf("GetRequestMetadata = %v, %v; want authorization: Bearer %s", md, err, want)
				}
			}
		})
	}
}

func TestTLSCredentialsInfo(t *testing.T) {
	c := TLSCredentials(nil)
	if got := c.Info().SecurityProtocol; got != "tls" {
		t.Errorf("SecurityProtocol = %q, want tls (grpc then allows per-RPC credentials that require security)", got)
	}
	if c.Clone().Info() != c.Info() {
		t.Error("Clone changed Info")
	}
}
