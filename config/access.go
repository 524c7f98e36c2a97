package config

import (
	"slices"
	"sort"
	"strings"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// AccessOptions returns the access policy's options: the allow lists of
// every authority and downstream.node_identity.
func (c *Config) AccessOptions() access.Options {
	opts := access.Options{Authorities: make(map[string]access.Authority), NodeIdentity: c.Downstream.NodeIdentity}
	for _, a := range c.Authorities {
		if a.Allow == nil && len(a.AllowByType) == 0 {
			continue
		}
		var aa access.Authority
		if a.Allow != nil {
			aa.Allow = slices.Clone(a.Allow)
		}
		if len(a.AllowByType) > 0 {
			aa.AllowByType = make(map[string][]access.AllowEntry, len(a.AllowByType))
			for t, rs := range a.AllowByType {
				aa.AllowByType[t] = slices.Clone(rs)
			}
		}
		opts.Authorities[a.Name] = aa
	}
	return opts
}

// access validates the allow lists, node_identity, rest_listen.
func (v *validator) access() {
	c := v.c
	for i, a := range c.Authorities {
		p := joinIndex("authorities", i)
		if a.Allow != nil {
			v.allowList(p+".allow", a.Allow)
		}
		types := make([]string, 0, len(a.AllowByType))
		for t := range a.AllowByType {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			tp := joinKey(p+".allow_by_type", t)
			if !xdstype.IsServed(t) && !slices.Contains(a.Types, t) {
				v.add(tp, "%q is neither a type the relay serves (%s) nor one listed in %s.types", t, strings.Join(xdstype.Served(), ", "), p)
			}
			v.allowList(tp, a.AllowByType[t])
		}
	}
	if c.Downstream.NodeIdentity != "" {
		if _, err := access.ParseTemplate(c.Downstream.NodeIdentity); err != nil {
			v.add("downstream.node_identity", "%v", err)
		}
		if c.Downstream.TLS.CAFile == "" {
			v.add("downstream.node_identity", "needs client certificates (downstream.tls.ca_file)")
		}
	}
	if c.RESTListen != "" {
		v.address("rest_listen", c.RESTListen)
	}
}

func (v *validator) allowList(path string, rs []access.AllowEntry) {
	if len(rs) == 0 {
		v.add(path, "empty list: it would deny every client; leave the key out to allow every client")
	}
	for j, r := range rs {
		if err := access.CheckEntry(r); err != nil {
			v.add(joinIndex(path, j), "%v", err)
		}
	}
}
