package config

import "github.com/xds-relay/xds-relay/internal/access"

// csds validates csds_listen: a host:port (that it is not another
// listener's is listenersApart's), and csds_max_streams_per_caller: at
// least 1.
func (v *validator) csds() {
	c := v.c
	if c.CSDSMaxStreamsPerCaller < 1 {
		v.add("csds_max_streams_per_caller", "must be at least 1")
	}
	if c.CSDSListen == "" {
		return
	}
	v.address("csds_listen", c.CSDSListen)
	v.csdsAllow()
}

// csdsAllow: who may call CSDS. A restricted authority's resource names
// must not be listed to a caller its rules would deny, so a config with
// one needs csds_allow, which needs client certificates to match.
func (v *validator) csdsAllow() {
	c := v.c
	for j, r := range c.CSDSAllow {
		if err := access.CheckCertEntry(r); err != nil {
			v.add(joinIndex("csds_allow", j), "%v", err)
		}
	}
	if len(c.CSDSAllow) > 0 && c.Downstream.TLS.CAFile == "" {
		v.add("csds_allow", "needs client certificates (downstream.tls.ca_file)")
	}
	if len(c.CSDSAllow) > 0 {
		return
	}
	for i, a := range c.Authorities {
		if a.Allow != nil || len(a.AllowByType) > 0 {
			v.add("csds_listen", "%s restricts who may read it, and CSDS lists every client's resource names: set csds_allow (client certificates allowed to call CSDS)", joinIndex("authorities", i))
			return
		}
	}
}
