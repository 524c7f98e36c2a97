// Package access decides which clients may subscribe to what: per
// authority (and per type URL, so Secrets can be narrower) a list of
// matchers on the client's verified certificate (URI SAN, DNS SAN) or on
// the node it claims (id, cluster). It also checks, optionally, that the
// node a client claims is the one its certificate names (NodeIdentity).
// It imports nothing of the project.
//
// Words, as this package uses them:
//   - pattern: a glob where '*' matches any run of characters, '/'
//     included; everything else is literal.
//   - allow entry (AllowEntry): one matcher (one kind, one pattern); a
//     list of entries allows a client when any of them matches it (the
//     access rules of an authority).
//   - identity: what is known of a client: the SANs of its verified
//     certificate (proof) and its node id and cluster (a claim).
package access
