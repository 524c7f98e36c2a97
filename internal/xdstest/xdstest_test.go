package xdstest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
)

// TestCA: a server certificate verifies for 127.0.0.1 and localhost, a
// client certificate for client auth, each carrying the SANs asked for.
func TestCA(t *testing.T) {
	ca := NewCA(t, "test CA")
	server := ca.Server("server")
	client := ca.Issue("client", x509.ExtKeyUsageClientAuth, SANs{URIs: []string{"spiffe://fleet.example/ns/prod/sa/app"}, DNS: []string{"app.prod.example"}})
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := server.TLS.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	leaf := client.TLS.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://fleet.example/ns/prod/sa/app" || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "app.prod.example" {
		t.Errorf("client SANs: URIs %v DNS %v", leaf.URIs, leaf.DNSNames)
	}
	if self := ca.SelfSigned().TLS.Leaf; self.Subject.CommonName != "test CA" || !self.IsCA {
		t.Errorf("self-signed pair: %v", self.Subject)
	}

	// A mutual TLS handshake over a pipe.
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
		done <- srv.Handshake()
	}()
	cl := tls.Client(b, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{client.TLS}})
	if err := cl.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
}

// TestPoll: Poll returns once check does.
func TestPoll(t *testing.T) {
	n := 0
	Poll(t, "third call", func() error {
		if n++; n < 3 {
			return errNotYet
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("check called %d times, want 3", n)
	}
}

var errNotYet = errors.New("not yet")

// TestAwait: Await re-checks each time wake yields.
func TestAwait(t *testing.T) {
	wake := make(chan int, 1)
	n := 0
	Await(t, "second call", wake, func() error {
		if n++; n < 2 {
			wake <- n
			return errNotYet
		}
		return nil
	})
	if n != 2 {
		t.Fatalf("check called %d times, want 2", n)
	}
}
