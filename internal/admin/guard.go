package admin

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// What the admin listener trusts. It has no authentication: whoever can
// connect to it may read every page and reload the config, so it binds
// loopback by default and belongs inside the cluster. Two checks keep a web
// page in an operator's browser (who has the admin port-forwarded, or
// reachable) from using that browser against it:
//
//   - Host (every request): an IP literal, "localhost", or a name listed in
//     admin_allowed_hosts; anything else is 403. A page that rebinds its own
//     DNS name to 127.0.0.1 sends its own name as Host, so it cannot read
//     /debug/config, /debug/clients or /debug/cache.
//   - Cross-origin (requests that change state, that is every method but
//     GET, HEAD and OPTIONS): refused with 403 when the browser says the
//     request is cross-site (Sec-Fetch-Site) or its Origin does not name
//     the request's own host (net/http's CrossOriginProtection). A form or
//     fetch() on another site cannot reload the config or set the log
//     level. Clients that are not browsers (curl, xds-relay reload) send
//     neither header and are let through.
//
// And state changes only by the documented method (POST /debug/reload,
// PUT /debug/log_level; 405 with Allow otherwise), so no "simple" GET can
// change anything.

// guard applies the Host and cross-origin checks to h.
type guard struct {
	// allowed returns the running config's admin_allowed_hosts; read-only
	// after New.
	allowed func() []string
	cop     *http.CrossOriginProtection // read-only after newGuard
}

func newGuard(allowed func() []string) *guard {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "admin: cross-origin request refused: a state-changing request must come from the admin's own origin (or from a client that is not a browser)", http.StatusForbidden)
	}))
	return &guard{allowed: allowed, cop: cop}
}

// wrap returns h behind the checks.
func (g *guard) wrap(h http.Handler) http.Handler {
	h = g.cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := g.checkHost(req.Host); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// checkHost: host (a Host header, with or without a port) is an IP
// literal, localhost, or a name in admin_allowed_hosts.
func (g *guard) checkHost(host string) error {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if name != "" && net.ParseIP(name) != nil {
		return nil
	}
	if strings.EqualFold(name, "localhost") || slices.ContainsFunc(g.allowed(), func(a string) bool {
		return strings.EqualFold(strings.TrimSuffix(a, "."), name)
	}) {
		return nil
	}
	return fmt.Errorf("admin: Host %q refused: not an IP address, localhost, or a name listed in admin_allowed_hosts", truncate(host, 256))
}
