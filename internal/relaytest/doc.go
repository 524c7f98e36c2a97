// Package relaytest runs the relay process for a test: the same wiring
// cmd/xds-relay runs (internal/relay's New and Start), on a config the
// test gives, closed when the test ends. It is the relay half of the
// relay-and-origin harness (integration/harness_test.go) and the one way
// a test outside internal/relay starts a whole relay in-process.
//
// Test support only; nothing but tests imports it.
package relaytest
