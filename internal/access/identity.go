package access

import (
	"crypto/tls"
	"crypto/x509"
)

// Identity is what is known of a client: the SANs of its verified
// certificate (none without mutual TLS) and its node id and cluster, which
// are only its claim.
type Identity struct {
	URISANs     []string
	DNSSANs     []string
	NodeID      string
	NodeCluster string
}

// FromTLS returns the SANs of the verified leaf certificate of cs; nothing
// when cs is nil or the peer's certificate was not verified (a certificate
// that was not verified proves nothing).
func FromTLS(cs *tls.ConnectionState) Identity {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}
	}
	return fromCert(cs.VerifiedChains[0][0])
}

func fromCert(c *x509.Certificate) Identity {
	var id Identity
	for _, u := range c.URIs {
		id.URISANs = append(id.URISANs, u.String())
	}
	id.DNSSANs = append(id.DNSSANs, c.DNSNames...)
	return id
}

// WithNode returns id with the node's id and cluster.
func (id Identity) WithNode(nodeID, cluster string) Identity {
	id.NodeID, id.NodeCluster = nodeID, cluster
	return id
}
