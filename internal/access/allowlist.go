package access

import "fmt"

// Allowlist is a list of rules on a caller's certificate alone (uri_san,
// dns_san): who may use a service that is not an authority's, such as
// CSDS. Any matching rule allows. Node rules have no place in it: a
// caller's node is what it claims.
type Allowlist struct {
	ms []matcher // read-only after NewAllowlist
}

// NewAllowlist compiles rules, refusing node_id and node_cluster rules.
func NewAllowlist(rules []AllowEntry) (*Allowlist, error) {
	for i, r := range rules {
		if err := CheckCertEntry(r); err != nil {
			return nil, fmt.Errorf("%w: [%d]: %v", ErrInvalidPolicy, i, err)
		}
	}
	ms, err := compileEntries(rules)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	return &Allowlist{ms: ms}, nil
}

// CheckCertEntry is CheckEntry for an Allowlist: exactly one of uri_san and
// dns_san.
func CheckCertEntry(r AllowEntry) error {
	if r.NodeID != "" || r.NodeCluster != "" {
		return fmt.Errorf("node_id and node_cluster are a caller's claim, not its certificate: use uri_san or dns_san")
	}
	return CheckEntry(r)
}

// Allows reports whether id's certificate matches one of the rules.
func (a *Allowlist) Allows(id *Identity) bool {
	for _, m := range a.ms {
		if m.matches(id) {
			return true
		}
	}
	return false
}
