// Package migrate converts the earlier relay's aggregation rules file
// (github.com/envoyproxy/xds-relay's KeyerConfiguration) into this relay's
// aggregation rules, and verifies a conversion by replaying generated
// requests through both key builders (legacykey, the earlier relay's
// behaviour reimplemented, and aggregation with the converted rules).
//
// Words:
//   - atom: one test a converted rule can state as a condition (a node
//     field's matcher, a metadata value's type or presence, the resource
//     name being the wildcard).
//   - formula: a legacy match predicate with the request type decided:
//     true, false, an atom, and/or/not of formulas, or an error (a request
//     that reaches it is refused).
//   - decision: one atom decided on a path through the legacy rules, true
//     or false (a path's decisions are what it found).
//   - leaf: one converted rule; the conversion walks the legacy rules in
//     their order, branching on each atom (true first), and every path is
//     a leaf. First match wins, so a leaf needs only the atoms its path
//     found true: a request that found one of them false went on to a
//     later leaf.
//   - difference: two generated requests that one key builder groups
//     together and the other apart, or one request that one refuses and
//     the other serves.
//
// Used by `xds-relay migrate-rules`.
package migrate
