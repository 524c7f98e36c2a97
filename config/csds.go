package config

// csds validates csds_listen: a host:port of its own (not the xDS, admin
// or REST listener's).
func (v *validator) csds() {
	c := v.c
	if c.CSDSListen == "" {
		return
	}
	v.address("csds_listen", c.CSDSListen)
	for _, other := range []struct{ key, addr string }{{"listen", c.Listen}, {"admin", c.Admin}, {"rest_listen", c.RESTListen}} {
		if sameAddress(c.CSDSListen, other.addr) {
			v.add("csds_listen", "same address as %s (%s)", other.key, other.addr)
		}
	}
}
