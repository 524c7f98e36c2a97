package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The earlier relay's bootstrap file (its api/protos/bootstrap/v1:
// server, origin_server, logging, cache, metrics_sink, and admin in its
// examples): what migrate-rules carries over into this relay's config, and
// where each of its settings goes now.

// Bootstrap is what the earlier relay's bootstrap says that this relay's
// config can hold, and a note for every setting it has.
type Bootstrap struct {
	// Listen is server.address: where the earlier relay's clients
	// connected ("" when absent).
	Listen string
	// Admin is admin.address ("" when absent).
	Admin string
	// Origin is origin_server.address, with an unspecified host (0.0.0.0,
	// ::) as the dialled address of this machine (127.0.0.1, ::1).
	Origin string
	// LogLevel is logging.level as this relay names it ("" when absent).
	LogLevel string
	// Notes say, for every setting the file has, where it goes now.
	Notes []Note
}

// Note is one setting of the earlier relay's bootstrap and where it goes in
// this relay's config.
type Note struct {
	Setting string // e.g. "cache.ttl 120s"
	Now     string // e.g. "log.level: debug", or why there is no equivalent
}

func (n Note) String() string { return n.Setting + " → " + n.Now }

// FileKind tells the earlier relay's two files apart by their top-level
// keys.
type FileKind int

const (
	// KindUnknown: neither file's keys.
	KindUnknown FileKind = iota
	// KindRules: an aggregation rules file (fragments).
	KindRules
	// KindBootstrap: a bootstrap file (origin_server, server, ...).
	KindBootstrap
)

// bootstrapKeys are the bootstrap's top-level keys.
var bootstrapKeys = []string{"server", "origin_server", "logging", "cache", "metrics_sink", "admin"}

// Kind says which of the earlier relay's files data looks like, and the
// top-level keys that say so.
func Kind(data []byte) (FileKind, []string) {
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return KindUnknown, nil
	}
	if _, ok := top["fragments"]; ok {
		return KindRules, []string{"fragments"}
	}
	var keys []string
	for _, k := range bootstrapKeys {
		if _, ok := top[k]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return KindUnknown, nil
	}
	return KindBootstrap, keys
}

// socketAddress is the bootstrap's SocketAddress.
type socketAddress struct {
	Address   string `yaml:"address"`
	PortValue int    `yaml:"port_value"`
}

func (s *socketAddress) hostPort() string {
	if s == nil || s.Address == "" || s.PortValue <= 0 || s.PortValue > 65535 {
		return ""
	}
	return net.JoinHostPort(s.Address, strconv.Itoa(s.PortValue))
}

type addressed struct {
	Address *socketAddress `yaml:"address"`
}

// legacyBootstrap is the earlier relay's bootstrap, field for field.
type legacyBootstrap struct {
	Server       *addressed `yaml:"server"`
	OriginServer *addressed `yaml:"origin_server"`
	Admin        *addressed `yaml:"admin"`
	Logging      *struct {
		Path  string    `yaml:"path"`
		Level yaml.Node `yaml:"level"`
	} `yaml:"logging"`
	Cache *struct {
		TTL        string `yaml:"ttl"`
		MaxEntries int    `yaml:"max_entries"`
	} `yaml:"cache"`
	MetricsSink *struct {
		Statsd *struct {
			Address       *socketAddress `yaml:"address"`
			RootPrefix    string         `yaml:"root_prefix"`
			FlushInterval string         `yaml:"flush_interval"`
		} `yaml:"statsd"`
	} `yaml:"metrics_sink"`
}

// ParseBootstrap reads the earlier relay's bootstrap file. It needs
// origin_server.address; every other setting is carried over or noted.
func ParseBootstrap(data []byte) (*Bootstrap, error) {
	if kind, _ := Kind(data); kind == KindRules {
		return nil, errors.New("this looks like the earlier relay's aggregation rules (it has fragments), not its bootstrap: pass it as the rules file")
	}
	var lb legacyBootstrap
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&lb); err != nil {
		return nil, fmt.Errorf("not the earlier relay's bootstrap: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if lb.OriginServer == nil || lb.OriginServer.Address.hostPort() == "" {
		return nil, errors.New("origin_server.address (address and port_value) is required")
	}
	b := &Bootstrap{}
	b.origin(lb.OriginServer.Address)
	b.listeners(lb)
	b.logging(lb)
	b.unsupported(lb)
	b.otherKeys(data)
	return b, nil
}

// origin: origin_server.address, an unspecified host dialled as this
// machine (where the earlier relay's dial of 0.0.0.0 went).
func (b *Bootstrap) origin(a *socketAddress) {
	old := a.hostPort()
	host := a.Address
	switch host {
	case "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	b.Origin = net.JoinHostPort(host, strconv.Itoa(a.PortValue))
	now := "authorities[0].origins[0]: " + b.Origin
	if b.Origin != old {
		now += " (" + a.Address + " dials this machine)"
	}
	b.note("origin_server.address "+old, now)
}

// listeners: server and admin are where the earlier relay listened; this
// relay listens there instead, so clients and scrapers need no change.
func (b *Bootstrap) listeners(lb legacyBootstrap) {
	if lb.Server != nil {
		if a := lb.Server.Address.hostPort(); a != "" {
			b.Listen = a
			b.note("server.address "+a, "listen: "+a+" (where clients connect)")
		}
	}
	if lb.Admin != nil {
		if a := lb.Admin.Address.hostPort(); a != "" {
			b.Admin = a
			b.note("admin.address "+a, "admin: "+a+" (its pages are this relay's: docs/operations.md, Admin pages)")
		}
	}
}

// legacyLevels: the earlier relay's logging.level enum, by name and number.
var legacyLevels = map[string]string{"INFO": "info", "0": "info", "DEBUG": "debug", "1": "debug", "WARN": "warn", "2": "warn", "ERROR": "error", "3": "error"}

func (b *Bootstrap) logging(lb legacyBootstrap) {
	if lb.Logging == nil {
		return
	}
	if v := lb.Logging.Level.Value; v != "" {
		if lvl, ok := legacyLevels[strings.ToUpper(v)]; ok {
			b.LogLevel = lvl
			b.note("logging.level "+v, "log.level: "+lvl)
		} else {
			b.note("logging.level "+v, "not a level the earlier relay knew: log.level keeps its default (info)")
		}
	}
	if p := lb.Logging.Path; p != "" {
		b.note("logging.path "+p, "no equivalent: this relay logs to stderr (log.format json or console); redirect it, or let the service manager collect it")
	}
}

// unsupported notes the settings this relay has no key for.
func (b *Bootstrap) unsupported(lb legacyBootstrap) {
	if c := lb.Cache; c != nil {
		if c.TTL != "" {
			b.note("cache.ttl "+c.TTL, "no equivalent: a resource is kept while the origin has it and sent again only when it changes; what no client watches is bounded by cache.max_resources and cache.max_bytes")
		}
		if c.MaxEntries != 0 {
			b.note("cache.max_entries "+strconv.Itoa(c.MaxEntries), "no equivalent: the earlier relay counted aggregation keys; this relay bounds resources no client watches (cache.max_resources, default 100000; cache.max_bytes)")
		}
	}
	if m := lb.MetricsSink; m != nil && m.Statsd != nil {
		s := "metrics_sink.statsd"
		if a := m.Statsd.Address.hostPort(); a != "" {
			s += " " + a
		}
		b.note(s, "no equivalent: use the Prometheus metrics at the admin address's /metrics (docs/metrics.md)")
	}
}

// otherKeys notes top-level keys the earlier relay's bootstrap does not have.
func (b *Bootstrap) otherKeys(data []byte) {
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return
	}
	var extra []string
	for k := range top {
		if !slices.Contains(bootstrapKeys, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		b.note(k, "not a key of the earlier relay's bootstrap: not read")
	}
}

func (b *Bootstrap) note(setting, now string) {
	b.Notes = append(b.Notes, Note{Setting: setting, Now: now})
}
