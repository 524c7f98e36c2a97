package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The relay's own listeners, and addresses that reach them. An origin that
// is one of the relay's listeners makes the relay ask itself for what its
// clients ask: nothing ever comes, and clients wait forever. Two listeners
// that reach one socket cannot both be bound. Both are decided by where an
// address goes, not by how it is spelled: 0.0.0.0, ::, localhost, a
// loopback or own address, or a name that resolves to one of them.

// resolveTimeout bounds the name lookups of one Validate (they are made
// only for a name whose port is one of the relay's listeners' ports).
const resolveTimeout = 2 * time.Second

// lookupHost resolves a host name to addresses; a variable so that tests
// can give names of their own.
var lookupHost = func(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// listener is one of the relay's listen addresses, by its config key.
type listener struct{ key, addr string }

// listeners are the relay's listen addresses, the unset ones left out.
func (c *Config) listeners() []listener {
	all := []listener{{"listen", c.Listen}, {"admin", c.Admin}, {"rest_listen", c.RESTListen}, {"csds_listen", c.CSDSListen}}
	out := all[:0]
	for _, l := range all {
		if l.addr != "" {
			out = append(out, l)
		}
	}
	return out
}

// addrs resolves host names and lists this machine's own addresses, once
// per Validate.
type addrs struct {
	ctx      context.Context
	names    map[string][]netip.Addr // host name → addresses; nil: did not resolve
	own      []netip.Addr            // this machine's interface addresses
	ownValid bool
}

func newAddrs(ctx context.Context) *addrs {
	return &addrs{ctx: ctx, names: make(map[string][]netip.Addr)}
}

// host is where a host part of an address goes: wildcard for "" and the
// unspecified addresses (every local address); else the addresses of an IP
// literal or of a name ("localhost" and *.localhost are loopback without a
// lookup). A name that does not resolve has no addresses.
func (a *addrs) host(h string) (wildcard bool, ips []netip.Addr, resolved bool) {
	if h == "" {
		return true, nil, false
	}
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		ip = ip.Unmap()
		return ip.IsUnspecified(), []netip.Addr{ip}, false
	}
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return false, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, true
	}
	got, seen := a.names[name]
	if !seen {
		ctx, cancel := context.WithTimeout(a.ctx, resolveTimeout)
		defer cancel()
		if res, err := lookupHost(ctx, name); err == nil {
			for _, ip := range res {
				got = append(got, ip.Unmap())
			}
		}
		a.names[name] = got
	}
	return false, got, true
}

// local reports whether ip is one of this machine's addresses: loopback,
// or an address of one of its interfaces.
func (a *addrs) local(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	if !a.ownValid {
		a.ownValid = true
		if ifs, err := net.InterfaceAddrs(); err == nil {
			for _, x := range ifs {
				if n, ok := x.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						a.own = append(a.own, ip.Unmap())
					}
				}
			}
		}
	}
	for _, o := range a.own {
		if o == ip {
			return true
		}
	}
	return false
}

// reaches reports whether dialling dial (host:port) reaches the socket a
// listener bound at lis (host:port) listens on, and how dial's host went
// there ("" for an address literal, else `"name" resolves to IP`). A
// listener on port 0 gets a port of its own and is never reached.
func (a *addrs) reaches(dial, lis string) (bool, string) {
	dh, dp, err1 := net.SplitHostPort(dial)
	lh, lp, err2 := net.SplitHostPort(lis)
	if err1 != nil || err2 != nil || !samePort(dp, lp) {
		return false, ""
	}
	lwild, lips, _ := a.host(lh)
	_, dips, named := a.host(dh)
	for _, ip := range dips {
		// Dialling an unspecified address reaches this machine.
		hit := ip.IsUnspecified() && (lwild || len(lips) > 0)
		hit = hit || (lwild && a.local(ip))
		for _, l := range lips {
			hit = hit || l == ip
		}
		if hit {
			if named {
				return true, fmt.Sprintf("%q resolves to %s", dh, ip)
			}
			return true, ""
		}
	}
	return false, ""
}

// overlaps reports whether two listen addresses would bind one socket:
// the same port, and hosts that share an address (a wildcard shares every
// one).
func (a *addrs) overlaps(x, y string) bool {
	xh, xp, err1 := net.SplitHostPort(x)
	yh, yp, err2 := net.SplitHostPort(y)
	if err1 != nil || err2 != nil || !samePort(xp, yp) {
		return false
	}
	xw, xips, _ := a.host(xh)
	yw, yips, _ := a.host(yh)
	if (xw && (yw || len(yips) > 0)) || (yw && len(xips) > 0) {
		return true
	}
	for _, i := range xips {
		for _, j := range yips {
			if i == j {
				return true
			}
		}
	}
	return false
}

// samePort: two ports that are one number, not 0 (each port 0 binds a
// port of its own).
func samePort(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 16)
	y, err2 := strconv.ParseUint(b, 10, 16)
	return err1 == nil && err2 == nil && x == y && x != 0
}

// selfOrigin refuses an origin (host:port, already checked) that reaches
// one of the relay's own listeners.
func (v *validator) selfOrigin(path, origin string) {
	if l, how, hit := v.c.ownListener(v.addrs, origin); hit {
		if how != "" {
			how = " (" + how + ")"
		}
		v.add(path, "%q is this relay's own %s address (%s)%s: the relay would ask itself for what its clients ask, and they would get nothing; give the origin control plane's host:port", origin, l.key, l.addr, how)
	}
}

// ownListener is the first of c's listeners that dialling addr reaches,
// and how addr's host went there (see reaches).
func (c *Config) ownListener(a *addrs, addr string) (l listener, how string, hit bool) {
	for _, l := range c.listeners() {
		if hit, how := a.reaches(addr, l.addr); hit {
			return l, how, true
		}
	}
	return listener{}, "", false
}

// OwnListener reports which of c's listeners dialling addr (host:port)
// would reach, however addr is spelled (see Validate, which refuses such
// an origin): its config key and address.
func (c *Config) OwnListener(addr string) (key, listenAddr string, ok bool) {
	l, _, hit := c.ownListener(newAddrs(context.Background()), addr)
	return l.key, l.addr, hit
}

// listenersApart refuses two listeners that would bind one socket.
func (v *validator) listenersApart() {
	ls := v.c.listeners()
	for i := range ls {
		for _, earlier := range ls[:i] {
			if v.addrs.overlaps(ls[i].addr, earlier.addr) {
				v.add(ls[i].key, "same address as %s (%s): each listener needs a port of its own", earlier.key, earlier.addr)
			}
		}
	}
}
