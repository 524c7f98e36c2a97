// Package xdstest is test support only: the wait and quiet timeouts every
// test uses (timeouts.go), raw xDS client streams with a receive pump
// (stream.go), and the live heap for memory measurements (heap.go).
// Nothing but tests imports it.
package xdstest
