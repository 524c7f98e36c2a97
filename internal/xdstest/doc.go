// Package xdstest is test support only: the wait and quiet timeouts every
// test uses (timeouts.go), Poll and Await to wait for a condition under
// that deadline (poll.go), a test CA issuing server and client
// certificates with SANs (pki.go), raw xDS client streams with a receive
// pump (stream.go), and the live heap for memory measurements (heap.go).
// Nothing but tests imports it.
package xdstest
