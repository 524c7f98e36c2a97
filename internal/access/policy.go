package access

import (
	"fmt"
	"sort"
)

// AllowEntry is one matcher: exactly one of its fields is set, to a
// pattern (a glob where '*' matches any run of characters, '/' included).
// It is also one entry of an allow list in the config (authorities[].allow,
// authorities[].allow_by_type), decoded by config as is; CheckEntry checks
// one.
type AllowEntry struct {
	// URISAN matches a URI SAN (a SPIFFE ID, say) of the client's verified
	// certificate (downstream.tls.ca_file).
	URISAN string `yaml:"uri_san"`
	// DNSSAN matches a DNS SAN of the client's verified certificate.
	DNSSAN string `yaml:"dns_san"`
	// NodeID matches the node id the client sends (node_id): for
	// plaintext deployments, a claim, not proof.
	NodeID string `yaml:"node_id"`
	// NodeCluster matches the node cluster the client sends
	// (node_cluster): a claim, not proof.
	NodeCluster string `yaml:"node_cluster"`
}

// Authority is the access rules of one authority. A nil Allow lets every
// client subscribe; for a type in AllowByType, that list replaces Allow.
type Authority struct {
	Allow       []AllowEntry
	AllowByType map[string][]AllowEntry
}

// Options configure a Policy.
type Options struct {
	// Authorities by name; an authority not listed is open to everyone.
	Authorities map[string]Authority
	// NodeIdentity, when set, is a URI SAN template the client's node must
	// match (CheckNode): "{cluster}" and "{id}" stand for the node's
	// cluster and id (literally), '*' is a glob. Default "": off.
	NodeIdentity string
}

// Policy is a compiled set of access rules. It is immutable, and safe for
// concurrent use; a nil *Policy allows everything.
type Policy struct {
	auths map[string]*authority // read-only after New
	node  *template             // read-only after New; nil: no node check
}

type authority struct {
	allow  []matcher            // nil: open
	byType map[string][]matcher // replaces allow for its types
}

type kind uint8

const (
	kindURISAN kind = iota
	kindDNSSAN
	kindNodeID
	kindNodeCluster
)

type matcher struct {
	kind kind
	p    Pattern
}

// New compiles opts. Errors wrap ErrInvalidPolicy and name the authority,
// the type and the rule's index.
func New(opts Options) (*Policy, error) {
	p := &Policy{auths: make(map[string]*authority, len(opts.Authorities))}
	names := make([]string, 0, len(opts.Authorities))
	for n := range opts.Authorities {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		a := opts.Authorities[name]
		ca := &authority{}
		if a.Allow != nil {
			ms, err := compileEntries(a.Allow)
			if err != nil {
				return nil, fmt.Errorf("%w: authority %q: allow%v", ErrInvalidPolicy, name, err)
			}
			ca.allow = ms
		}
		if len(a.AllowByType) > 0 {
			ca.byType = make(map[string][]matcher, len(a.AllowByType))
			for t, rules := range a.AllowByType {
				ms, err := compileEntries(rules)
				if err != nil {
					return nil, fmt.Errorf("%w: authority %q: allow_by_type %s%v", ErrInvalidPolicy, name, t, err)
				}
				ca.byType[t] = ms
			}
		}
		if ca.allow != nil || ca.byType != nil {
			p.auths[name] = ca
		}
	}
	if opts.NodeIdentity != "" {
		t, err := ParseTemplate(opts.NodeIdentity)
		if err != nil {
			return nil, fmt.Errorf("%w: node identity: %v", ErrInvalidPolicy, err)
		}
		p.node = &t
	}
	return p, nil
}

func compileEntries(rules []AllowEntry) ([]matcher, error) {
	ms := make([]matcher, 0, len(rules))
	for i, r := range rules {
		m, err := compileEntry(r)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %v", i, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// CheckEntry reports what is wrong with r: not exactly one matcher, or an
// empty pattern. The problem reads after the rule's path.
func CheckEntry(r AllowEntry) error {
	_, err := compileEntry(r)
	return err
}

func compileEntry(r AllowEntry) (matcher, error) {
	var m matcher
	set := 0
	for k, v := range [...]string{kindURISAN: r.URISAN, kindDNSSAN: r.DNSSAN, kindNodeID: r.NodeID, kindNodeCluster: r.NodeCluster} {
		if v != "" {
			set++
			m = matcher{kind: kind(k), p: Compile(v)}
		}
	}
	if set != 1 {
		return matcher{}, fmt.Errorf("want exactly one of uri_san, dns_san, node_id, node_cluster (with a non-empty pattern), got %d", set)
	}
	return m, nil
}

// Restricted reports whether any rule applies to typeURL of authority:
// when not, every client is allowed and nothing need be looked up.
func (p *Policy) Restricted(authority, typeURL string) bool {
	return p.rules(authority, typeURL) != nil
}

// rules returns the matchers for typeURL of authority; nil: open.
func (p *Policy) rules(authority, typeURL string) []matcher {
	if p == nil {
		return nil
	}
	a, ok := p.auths[authority]
	if !ok {
		return nil
	}
	if ms, ok := a.byType[typeURL]; ok {
		return ms
	}
	return a.allow
}

// Allowed reports whether id may subscribe to names of typeURL in
// authority: no rules apply, or any rule matches id.
func (p *Policy) Allowed(authority, typeURL string, id *Identity) bool {
	ms := p.rules(authority, typeURL)
	if ms == nil {
		return true
	}
	for _, m := range ms {
		if m.matches(id) {
			return true
		}
	}
	return false
}

// DeniesAny reports whether some authority's rules for typeURL deny id:
// when not, id may receive every authority's names of typeURL, and the
// members of a collection need no check of their own.
func (p *Policy) DeniesAny(typeURL string, id *Identity) bool {
	if p == nil {
		return false
	}
	for name := range p.auths {
		if !p.Allowed(name, typeURL, id) {
			return true
		}
	}
	return false
}

func (m matcher) matches(id *Identity) bool {
	switch m.kind {
	case kindURISAN:
		return anyMatch(m.p, id.URISANs)
	case kindDNSSAN:
		return anyMatch(m.p, id.DNSSANs)
	case kindNodeID:
		return m.p.Match(id.NodeID)
	case kindNodeCluster:
		return m.p.Match(id.NodeCluster)
	}
	return false
}

func anyMatch(p Pattern, values []string) bool {
	for _, v := range values {
		if p.Match(v) {
			return true
		}
	}
	return false
}

// ChecksNode reports whether CheckNode checks anything.
func (p *Policy) ChecksNode() bool { return p != nil && p.node != nil }

// CheckNode returns an error wrapping ErrNodeMismatch unless one of id's
// URI SANs matches the node identity template with id's node cluster and
// id put in; nil when no template is configured.
func (p *Policy) CheckNode(id *Identity) error {
	if !p.ChecksNode() {
		return nil
	}
	if p.node.Match(id.URISANs, id.NodeID, id.NodeCluster) {
		return nil
	}
	return fmt.Errorf("%w: no URI SAN of the certificate matches %s for this node", ErrNodeMismatch, p.node.src)
}
