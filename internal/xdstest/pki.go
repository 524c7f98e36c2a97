package xdstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: ECDSA P-256, valid from
// an hour ago to an hour from now. It issues server and client
// certificates with the SANs a test names.
type CA struct {
	t    testing.TB
	key  *ecdsa.PrivateKey
	Cert *x509.Certificate
	PEM  []byte // the CA certificate, PEM
	self Leaf   // the CA's own certificate and key, as a pair
}

// Leaf is a certificate the CA issued, as PEM and as a tls.Certificate.
type Leaf struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate
}

// SANs are the subject alternative names of an issued certificate.
type SANs struct {
	URIs []string // e.g. SPIFFE IDs
	DNS  []string
	IPs  []net.IP
}

// serials numbers every certificate the tests issue.
var serials atomic.Int64

// NewCA makes a CA whose certificate's common name is cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serials.Add(1)),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{t: t, key: key, Cert: cert, PEM: certPEM(der), self: leaf(t, der, key)}
}

// Pool is a CertPool of the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// SelfSigned is the CA's own certificate and key as a pair: a self-signed
// certificate named as the CA, for tests that only load and compare one.
func (ca *CA) SelfSigned() Leaf { return ca.self }

// Server issues a serving certificate named cn for 127.0.0.1 and
// localhost.
func (ca *CA) Server(cn string) Leaf {
	ca.t.Helper()
	return ca.Issue(cn, x509.ExtKeyUsageServerAuth, SANs{DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
}

// Client issues a client certificate named cn, with no SANs.
func (ca *CA) Client(cn string) Leaf {
	ca.t.Helper()
	return ca.Issue(cn, x509.ExtKeyUsageClientAuth, SANs{})
}

// Issue issues a certificate named cn for usage with sans.
func (ca *CA) Issue(cn string, usage x509.ExtKeyUsage, sans SANs) Leaf {
	ca.t.Helper()
	key := newKey(ca.t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     sans.DNS,
		IPAddresses:  sans.IPs,
	}
	for _, u := range sans.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			ca.t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return leaf(ca.t, der, key)
}

// WriteFile writes the CA certificate as dir/name and returns the path.
func (ca *CA) WriteFile(dir, name string) string {
	ca.t.Helper()
	return writeFile(ca.t, filepath.Join(dir, name), ca.PEM)
}

// WriteFiles writes the certificate and key as dir/name.pem and
// dir/name-key.pem and returns their paths.
func (l Leaf) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	return writeFile(t, filepath.Join(dir, name+".pem"), l.CertPEM), writeFile(t, filepath.Join(dir, name+"-key.pem"), l.KeyPEM)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func leaf(t testing.TB, der []byte, key *ecdsa.PrivateKey) Leaf {
	t.Helper()
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := Leaf{CertPEM: certPEM(der), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return l
}

func writeFile(t testing.TB, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
