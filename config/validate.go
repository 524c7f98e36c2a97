package config

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// maxMsgSize is the largest message size gRPC can be told about.
const maxMsgSize = ByteSize(math.MaxInt32)

// Validate checks the whole config and returns every problem found, each a
// *FieldError with its field path (and line, when the config was parsed),
// joined with errors.Join. It reads the file system: TLS files and file://
// origin directories must exist.
func (c *Config) Validate() error {
	v := &validator{c: c, addrs: newAddrs(context.Background())}
	v.address("listen", c.Listen)
	v.address("admin", c.Admin)
	v.listenersApart()
	for i, h := range c.AdminAllowedHosts {
		if h == "" || strings.ContainsFunc(h, func(r rune) bool {
			return strings.ContainsRune(":/[]*@", r) || unicode.IsSpace(r) || unicode.IsControl(r)
		}) {
			v.add(joinIndex("admin_allowed_hosts", i), "%q is not a host name (no port, scheme or wildcard)", h)
		}
	}
	if c.Node.ID == "" {
		v.add("node.id", "must not be empty")
	}
	v.authorities()
	if c.Cache.MaxResources < 0 {
		v.add("cache.max_resources", "must not be negative, got %d", c.Cache.MaxResources)
	}
	if c.Cache.MaxBytes < 0 {
		v.add("cache.max_bytes", "must not be negative, got %d", c.Cache.MaxBytes)
	}
	if c.Cache.RefetchInterval < 0 {
		v.add("cache.refetch_interval", "must not be negative, got %v", c.Cache.RefetchInterval)
	}
	v.snapshot()
	v.aggregation()
	v.access()
	v.csds()
	v.oneOf("log.level", c.Log.Level, LogDebug, LogInfo, LogWarn, LogError)
	v.oneOf("log.format", c.Log.Format, LogJSON, LogConsole)
	v.downstream()
	v.upstream()
	v.delivery()
	v.positive("propagation.report_after", c.Propagation.ReportAfter)
	v.positive("shutdown_grace_period", c.ShutdownGracePeriod)
	return c.join(v.problems)
}

type validator struct {
	c        *Config
	addrs    *addrs // where addresses go (selforigin.go)
	problems []*FieldError
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, &FieldError{Path: path, Line: v.c.lines.line(path), Problem: fmt.Sprintf(format, args...)})
}

// addMissing is add for a missing field that cause requires: reported on
// cause's line (the missing field has none of its own, and its parent's
// would list the consequence before its cause).
func (v *validator) addMissing(path, cause, format string, args ...any) {
	v.problems = append(v.problems, &FieldError{Path: path, Line: v.c.lines.line(cause), Problem: fmt.Sprintf(format, args...)})
}

func (v *validator) authorities() {
	c := v.c
	if len(c.Authorities) == 0 {
		v.add("authorities", "at least one authority is required")
	}
	first := map[string]string{} // name -> path of its first entry
	for i, a := range c.Authorities {
		p := joinIndex("authorities", i)
		switch {
		case a.Name == "":
			v.add(p+".name", "must not be empty")
		case strings.ContainsFunc(a.Name, func(r rune) bool {
			return strings.ContainsRune("/?#", r) || unicode.IsSpace(r) || unicode.IsControl(r)
		}):
			v.add(p+".name", "%q is not an authority: it must not contain '/', '?', '#' or white space", a.Name)
		default:
			if prev, dup := first[a.Name]; dup {
				v.add(p+".name", "duplicate authority name %q (first at %s%s)", a.Name, prev, v.lineSuffix(prev))
			} else {
				first[a.Name] = p + ".name"
			}
		}
		if len(a.Origins) == 0 {
			v.add(p+".origins", "at least one origin is required")
		}
		for j, o := range a.Origins {
			v.origin(joinIndex(p+".origins", j), o)
		}
		v.oneOf(p+".transport", a.Transport, xdstype.TransportDelta, xdstype.TransportSotW, xdstype.TransportDeltaPerType, xdstype.TransportSotWPerType)
		v.oneOf(p+".glob_collections", a.GlobCollections, GlobNative, GlobEmulated)
		for j, t := range a.Types {
			if err := xdstype.CheckTypeURL(t); err != nil {
				v.add(joinIndex(p+".types", j), "%v", err)
			}
		}
		v.authorityUpstream(p, a)
	}
}

func (v *validator) lineSuffix(path string) string {
	if l := v.c.lines.line(path); l > 0 {
		return fmt.Sprintf(", line %d", l)
	}
	return ""
}

func (v *validator) origin(path, o string) {
	if dir, ok := strings.CutPrefix(o, FileOriginPrefix); ok {
		if dir == "" {
			v.add(path, "%q: file origin needs a directory (file://DIR)", o)
			return
		}
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			v.add(path, "%q: %v", o, unwrapPathError(err))
		case !fi.IsDir():
			v.add(path, "%q: %s is not a directory", o, dir)
		}
		return
	}
	if strings.Contains(o, "://") {
		v.add(path, "%q is neither host:port nor file://DIR", o)
		return
	}
	if err := checkHostPort(o, false); err != nil {
		v.add(path, "%q is neither host:port nor file://DIR: %v", o, err)
		return
	}
	v.selfOrigin(path, o)
}

func (v *validator) aggregation() {
	v.plainNames()
	for _, fe := range aggregation.Validate(v.c.Aggregation.Rules, v.c.AuthorityNames()) {
		v.add(joinKey("aggregation", fe.Path), "%s", fe.Problem)
	}
}

func (v *validator) downstream() {
	d := v.c.Downstream
	v.serverTLS("downstream.tls", d.TLS)
	v.positive("downstream.keepalive.time", d.Keepalive.Time)
	v.positive("downstream.keepalive.timeout", d.Keepalive.Timeout)
	v.nonNegative("downstream.keepalive.min_client_ping_interval", d.Keepalive.MinClientPingInterval)
	v.msgSize("downstream.max_recv_msg_size", d.MaxRecvMsgSize)
	v.msgSize("downstream.max_send_msg_size", d.MaxSendMsgSize)
	v.positive("downstream.send_timeout", d.SendTimeout)
	v.oneOf("downstream.slow_clients", d.SlowClients, SlowClientsPark, SlowClientsDisconnect)
	v.positive("downstream.fetch_wait", d.FetchWait)
	v.nonNegative("downstream.gather_window", d.GatherWindow)
	v.lifecycle()
	l := d.Limits
	v.positiveCount("downstream.limits.max_streams", l.MaxStreams)
	v.positiveCount("downstream.limits.max_streams_per_connection", l.MaxStreamsPerConnection)
	v.positiveCount("downstream.limits.max_names_per_stream", l.MaxNamesPerStream)
	v.positiveCount("downstream.limits.max_name_length", l.MaxNameLength)
	v.positiveCount("downstream.limits.max_types_per_stream", l.MaxTypesPerStream)
	v.positiveCount("downstream.limits.max_version_length", l.MaxVersionLength)
	v.positiveCount("downstream.limits.max_groups_per_authority", l.MaxGroupsPerAuthority)
	v.positiveCount("downstream.limits.max_new_groups_per_stream", l.MaxNewGroupsPerStream)
	v.positiveCount("downstream.limits.requests_per_second", l.RequestsPerSecond)
	v.positiveCount("downstream.limits.request_burst", l.RequestBurst)
	v.positive("downstream.rest.read_timeout", d.REST.ReadTimeout)
	v.positive("downstream.rest.write_timeout", d.REST.WriteTimeout)
	v.positive("downstream.rest.idle_timeout", d.REST.IdleTimeout)
}

func (v *validator) positiveCount(path string, n int) {
	if n <= 0 {
		v.add(path, "must be a positive number, got %d", n)
	}
}

func (v *validator) upstream() {
	u := v.c.Upstream
	v.clientTLS("upstream.tls", u.TLS)
	v.bearerToken("upstream.bearer_token_file", u.BearerTokenFile)
	v.positive("upstream.keepalive.time", u.Keepalive.Time)
	v.positive("upstream.keepalive.timeout", u.Keepalive.Timeout)
	v.msgSize("upstream.max_recv_msg_size", u.MaxRecvMsgSize)
	v.msgSize("upstream.max_send_msg_size", u.MaxSendMsgSize)
	v.msgSize("upstream.max_request_size", u.MaxRequestSize)
	if u.MaxRequestSize > u.MaxSendMsgSize && u.MaxSendMsgSize > 0 {
		v.add("upstream.max_request_size", "%s is above upstream.max_send_msg_size (%s)", u.MaxRequestSize, u.MaxSendMsgSize)
	}
	v.positive("upstream.connect_timeout", u.ConnectTimeout)
	v.positive("upstream.failback_interval", u.FailbackInterval)
	v.positive("upstream.idle_timeout", u.IdleTimeout)
	v.positive("upstream.response_timeout", u.ResponseTimeout)
	b := u.Backoff
	v.positive("upstream.backoff.initial", b.Initial)
	v.positive("upstream.backoff.max", b.Max)
	if b.Initial > 0 && b.Max > 0 && b.Max < b.Initial {
		v.add("upstream.backoff.max", "%s is below backoff.initial (%s)", b.Max, b.Initial)
	}
	if b.Multiplier < 1 || math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0) {
		v.add("upstream.backoff.multiplier", "must be a finite number >= 1, got %v", b.Multiplier)
	}
	if !(b.Jitter >= 0 && b.Jitter <= 1) {
		v.add("upstream.backoff.jitter", "must be between 0 and 1, got %v", b.Jitter)
	}
}

func (v *validator) serverTLS(path string, t ServerTLS) {
	v.file(path+".cert_file", t.CertFile)
	v.file(path+".key_file", t.KeyFile)
	v.file(path+".ca_file", t.CAFile)
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.addMissing(path+".key_file", path+".cert_file", "required when cert_file is set")
	case t.CertFile == "" && t.KeyFile != "":
		v.addMissing(path+".cert_file", path+".key_file", "required when key_file is set")
	case t.CertFile == "" && t.CAFile != "":
		v.addMissing(path+".cert_file", path+".ca_file", "required when ca_file is set (client certificates need a TLS listener)")
	}
}

func (v *validator) clientTLS(path string, t ClientTLS) {
	v.file(path+".ca_file", t.CAFile)
	v.file(path+".cert_file", t.CertFile)
	v.file(path+".key_file", t.KeyFile)
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.addMissing(path+".key_file", path+".cert_file", "required when cert_file is set")
	case t.CertFile == "" && t.KeyFile != "":
		v.addMissing(path+".cert_file", path+".key_file", "required when key_file is set")
	}
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.ServerName != "") {
		v.add(path+".enabled", "TLS settings are given but enabled is false")
	}
}

// file checks that a configured file (if any) is a readable regular file.
func (v *validator) file(path, name string) {
	if name == "" {
		return
	}
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		v.add(path, "%v", unwrapPathError(err))
	case fi.IsDir():
		v.add(path, "%s is a directory, not a file", name)
	}
}

func (v *validator) address(path, addr string) {
	if addr == "" {
		v.add(path, "must not be empty (want host:port)")
		return
	}
	if err := checkHostPort(addr, true); err != nil {
		v.add(path, "%q is not host:port: %v", addr, err)
	}
}

func (v *validator) oneOf(path, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	v.add(path, "%q is not one of %s", got, strings.Join(allowed, ", "))
}

func (v *validator) positive(path string, d time.Duration) {
	if d <= 0 {
		v.add(path, "must be a positive duration, got %s", d)
	}
}

func (v *validator) nonNegative(path string, d time.Duration) {
	if d < 0 {
		v.add(path, "must not be negative, got %s", d)
	}
}

func (v *validator) msgSize(path string, s ByteSize) {
	if s <= 0 || s > maxMsgSize {
		v.add(path, "must be between 1B and %d bytes, got %s", maxMsgSize, s)
	}
}

// checkHostPort accepts "host:port" with a numeric port; emptyHost allows
// ":port" (every interface), which is fine to listen on but not to dial.
func checkHostPort(addr string, emptyHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return unwrapAddrError(err)
	}
	if host == "" && !emptyHost {
		return fmt.Errorf("missing host")
	}
	if strings.ContainsFunc(host, unicode.IsSpace) {
		return fmt.Errorf("host contains white space")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || port == "" {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if n == 0 && !emptyHost {
		return fmt.Errorf("port 0 cannot be dialled")
	}
	return nil
}

func unwrapAddrError(err error) error {
	if ae, ok := err.(*net.AddrError); ok {
		return fmt.Errorf("%s", ae.Err)
	}
	return err
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
