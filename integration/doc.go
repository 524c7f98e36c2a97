// Package integration holds tests that start real parts on loopback: a
// go-control-plane origin, the relay, and real xDS clients.
//
// harness_test.go is the relay-and-origin harness every test here starts
// its parts with: the origin (gcpOrigin) and the relay, run through the
// process's own wiring (internal/relaytest: internal/relay's New and
// Start, as cmd/xds-relay runs them) by startRelay, newRelay and
// runRelay. main_test.go runs goleak.
//
// Every other file is named <area>_<topic>_test.go (or <area>_test.go),
// its area the package or doc topic whose behaviour it pins: access,
// admin, aggregation, cache, config, csds, delivery, downstream, faults
// (docs/reliability.md), loadgen, metrics, propagation, relay, snapshot,
// upstream (docs/layout_test.go checks the names against this list).
package integration
