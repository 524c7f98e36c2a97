package csds

import (
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/internal/access"
)

// TestCallerOf: a caller is its certificate's first URI SAN, else its
// first DNS SAN, else its IP address (any port).
func TestCallerOf(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 40000}
	for _, tc := range []struct {
		name string
		id   access.Identity
		addr net.Addr
		want string
	}{
		{"uri SAN first", access.Identity{URISANs: []string{"spiffe://ops/a", "spiffe://ops/b"}, DNSSANs: []string{"ops.example"}}, addr, "uri_san spiffe://ops/a"},
		{"dns SAN", access.Identity{DNSSANs: []string{"ops.example"}}, addr, "dns_san ops.example"},
		{"no certificate: the IP", access.Identity{}, addr, "ip 10.1.2.3"},
		{"another port, same caller", access.Identity{}, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 1}, "ip 10.1.2.3"},
		{"IPv6", access.Identity{}, &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, "ip 2001:db8::1"},
		{"no address", access.Identity{}, nil, "unknown address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := callerOf(tc.id, tc.addr); got != tc.want {
				t.Errorf("callerOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCallersBound: a caller holds at most max places; releasing one
// gives it back; callers are counted apart.
func TestCallersBound(t *testing.T) {
	c := newCallers(2)
	var releases []func()
	for range 2 {
		release, err := c.acquire("ip 10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if _, err := c.acquire("ip 10.0.0.1"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("third place: %v, want ResourceExhausted", err)
	}
	if _, err := c.acquire("ip 10.0.0.2"); err != nil {
		t.Errorf("another caller: %v", err)
	}
	releases[0]()
	if _, err := c.acquire("ip 10.0.0.1"); err != nil {
		t.Errorf("after a release: %v", err)
	}
}
