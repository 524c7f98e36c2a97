// Package relay is the xds-relay process as a library: it builds every
// component from a config.Config, binds the downstream gRPC listener and the
// admin HTTP server, and shuts everything down within the grace period.
// cmd/xds-relay and the integration tests both start the relay through it.
package relay
