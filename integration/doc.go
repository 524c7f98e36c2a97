// Package integration holds tests that start real parts on loopback: a
// go-control-plane origin, the relay, and real xDS clients.
package integration
