package creds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/config"
)

// TestOrigins: equal settings get the very same credentials value (so
// connections are shared and a reload restarts nothing), others their own;
// files that do not load are an error and cache nothing.
func TestOrigins(t *testing.T) {
	dir := t.TempDir()
	tokA, tokB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{tokA, tokB} {
		if err := os.WriteFile(f, []byte("tok-"+filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := NewOrigins(nil)
	plain := config.ClientTLS{Enabled: true}
	named := config.ClientTLS{Enabled: true, ServerName: "origin.example"}
	t1, err1 := o.TLS(plain)
	t2, err2 := o.TLS(config.ClientTLS{Enabled: true})
	t3, err3 := o.TLS(named)
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("TLS: %v, %v, %v", err1, err2, err3)
	}
	if t1 != t2 || t1 == t3 {
		t.Errorf("TLS values: equal settings shared %v (want true), different settings shared %v (want false)", t1 == t2, t1 == t3)
	}
	p1, err1 := o.Token(tokA, false)
	p2, err2 := o.Token(tokA, false)
	p3, err3 := o.Token(tokB, false)
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("Token: %v, %v, %v", err1, err2, err3)
	}
	if p1 != p2 || p1 == p3 {
		t.Errorf("token values: same file shared %v (want true), other file shared %v (want false)", p1 == p2, p1 == p3)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := o.Token(missing, false); err == nil || !strings.Contains(err.Error(), "bearer token file") {
		t.Errorf("Token(missing) = %v, want a bearer token file error", err)
	}
	if _, err := o.TLS(config.ClientTLS{Enabled: true, CAFile: missing}); err == nil {
		t.Error("TLS with a missing CA file: no error")
	}
}
