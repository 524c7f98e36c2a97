// Package legacykey reimplements, for comparison only, how the earlier
// relay (github.com/envoyproxy/xds-relay) built a request's aggregation
// key from its rules file (a KeyerConfiguration): written from that
// relay's documented semantics and its tests, not from its code.
//
// Words:
//   - fragment: one piece of the key; every fragment contributes the
//     results of all of its rules that match (not only the first), and the
//     fragments' results are joined with "_".
//   - predicate: a match condition (and, or, not, any, request type, node
//     field); result: what a matching rule contributes (a string, a node
//     field or resource name through an action, several concatenated).
//   - error: the earlier relay refused a request whose key it could not
//     build (an empty value, an absent metadata path, a node without
//     metadata, a regex that does not compile, no fragment matched, EDS
//     without names).
//
// Nothing here serves traffic: migrate uses it to check that converted
// rules group requests as the earlier relay did.
package legacykey
