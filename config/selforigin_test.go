package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
)

// stubLookups makes host name lookups answer from names alone (no DNS) for
// the test.
func stubLookups(t *testing.T, names map[string][]netip.Addr) {
	t.Helper()
	saved := lookupHost
	lookupHost = func(_ context.Context, host string) ([]netip.Addr, error) {
		if ips, ok := names[host]; ok {
			return ips, nil
		}
		return nil, &net.DNSError{Err: "no such host (test)", Name: host, IsNotFound: true}
	}
	t.Cleanup(func() { lookupHost = saved })
}

// ownAddress is one of this machine's non-loopback interface addresses
// ("" when it has none).
func ownAddress(t *testing.T) string {
	t.Helper()
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range ifs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TestSelfOrigin: an origin that reaches one of the relay's own listeners
// (listen, admin, rest_listen, csds_listen), however it is spelled, is
// refused with its field path; the same host on another port, or another
// address of a listener bound to one address, is an origin like any.
func TestSelfOrigin(t *testing.T) {
	own := ownAddress(t)
	stubLookups(t, map[string][]netip.Addr{
		"ctl.example":    {netip.MustParseAddr("127.0.0.1")},
		"mapped.example": {netip.MustParseAddr("::ffff:127.0.0.1")},
		"remote.example": {netip.MustParseAddr("192.0.2.77")},
	})
	const listeners = "listen: %q\nadmin: 127.0.0.1:18001\nrest_listen: 127.0.0.1:18002\ncsds_listen: 127.0.0.1:18003\n"
	const path, line = "authorities[0].origins[0]", 7
	tests := []struct {
		name   string
		listen string
		origin string
		want   string // substring of the problem; "" for none
	}{
		{"the default listen address", "127.0.0.1:18000", "127.0.0.1:18000", `"127.0.0.1:18000" is this relay's own listen address (127.0.0.1:18000): the relay would ask itself`},
		{"0.0.0.0 dials this machine", "127.0.0.1:18000", "0.0.0.0:18000", "own listen address"},
		{"the IPv6 unspecified address", "127.0.0.1:18000", "[::]:18000", "own listen address"},
		{"localhost", "127.0.0.1:18000", "localhost:18000", "own listen address"},
		{"localhost, upper case, with the root dot", "127.0.0.1:18000", "LocalHost.:18000", "own listen address"},
		{"a name that resolves to loopback", "127.0.0.1:18000", "ctl.example:18000", `own listen address (127.0.0.1:18000) ("ctl.example" resolves to 127.0.0.1)`},
		{"a name that resolves to a mapped loopback", "127.0.0.1:18000", "mapped.example:18000", "own listen address"},
		{"another loopback address, listener on every interface", "0.0.0.0:18000", "127.0.0.2:18000", "own listen address (0.0.0.0:18000)"},
		{"IPv6 loopback, listener on every interface", ":18000", "[::1]:18000", "own listen address (:18000)"},
		{"IPv6 loopback, listener on [::]", "[::]:18000", "[::1]:18000", "own listen address"},
		{"the admin listener", "127.0.0.1:18000", "127.0.0.1:18001", "own admin address (127.0.0.1:18001)"},
		{"the REST listener", "127.0.0.1:18000", "localhost:18002", "own rest_listen address (127.0.0.1:18002)"},
		{"the CSDS listener", "127.0.0.1:18000", "0.0.0.0:18003", "own csds_listen address (127.0.0.1:18003)"},

		{"another port on localhost", "127.0.0.1:18000", "127.0.0.1:18010", ""},
		{"another port, by name", "127.0.0.1:18000", "localhost:18010", ""},
		{"another loopback address than the listener's", "127.0.0.1:18000", "127.0.0.2:18000", ""},
		{"IPv6 loopback, IPv4 listener", "127.0.0.1:18000", "[::1]:18000", ""},
		{"a remote host on the same port", "0.0.0.0:18000", "192.0.2.77:18000", ""},
		{"a remote name on the same port", "0.0.0.0:18000", "remote.example:18000", ""},
		{"a name that does not resolve", "0.0.0.0:18000", "gone.example:18000", ""},
		{"a listener on port 0", "127.0.0.1:0", "127.0.0.1:0", "port 0 cannot be dialled"},
	}
	if own != "" {
		tests = append(tests,
			struct{ name, listen, origin, want string }{"this machine's own address, listener on every interface", "0.0.0.0:18000", net.JoinHostPort(own, "18000"), "own listen address"},
			struct{ name, listen, origin, want string }{"this machine's own address, listener on loopback", "127.0.0.1:18000", net.JoinHostPort(own, "18000"), ""},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := fmt.Sprintf(listeners, tt.listen) + "authorities:\n  - name: a\n    origins: [" + fmt.Sprintf("%q", tt.origin) + "]\n"
			_, err := Parse([]byte(yaml), "relay.yaml")
			var want []problem
			if tt.want != "" {
				want = []problem{{path, line, tt.want}}
			}
			if diff := diffProblems(want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// TestListenersApart: two listeners that would bind one socket are
// refused whatever their spelling; port 0 and distinct addresses are not.
func TestListenersApart(t *testing.T) {
	stubLookups(t, nil)
	tests := []struct {
		name  string
		extra string
		want  []problem
	}{
		{name: "equal", extra: "listen: 127.0.0.1:5\nadmin: 127.0.0.1:5\n", want: []problem{{"admin", 5, "same address as listen (127.0.0.1:5)"}}},
		{name: "every interface and loopback", extra: "listen: 0.0.0.0:5\nadmin: 127.0.0.1:5\n", want: []problem{{"admin", 5, "same address as listen (0.0.0.0:5)"}}},
		{name: "empty host and localhost", extra: "listen: :5\nrest_listen: localhost:5\n", want: []problem{{"rest_listen", 5, "same address as listen (:5)"}}},
		{name: "csds on the admin port by another spelling", extra: "admin: 127.0.0.1:6\ncsds_listen: \"[::]:6\"\n", want: []problem{{"csds_listen", 5, "same address as admin (127.0.0.1:6)"}}},
		{name: "port 0 twice", extra: "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"},
		{name: "two loopback addresses", extra: "listen: 127.0.0.1:5\nadmin: 127.0.0.2:5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimalAuthorities+tt.extra), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}
