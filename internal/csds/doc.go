// Package csds serves Client Status Discovery
// (envoy.service.status.v3.ClientStatusDiscoveryService) on csds_listen,
// and the same report counted per client on the admin listener
// (/debug/csds): for each connected client stream, each resource it was
// sent, the version, and whether the client ACKed or NACKed it.
//
// It is a client of internal/downstream (downstream.Server.ConfigStatus, a
// read-only copy of each session's state taken under that session's mutex,
// one session at a time); internal/relay wires it in, binds its
// csds_listen listener and hands it to Serve (the package binds nothing),
// and internal/admin serves Debug's report as /debug/csds.
//
// Words, as this package uses them:
//   - client: one connected xDS stream (SotW or delta, ADS or per-type);
//     unary Fetch and REST-JSON polls are not connected and not reported.
//     A proxy with several streams is several ClientConfigs with one node.
//   - report: what downstream returns for one request, bounded by
//     DefaultMaxClients and DefaultMaxResources; response: its protobuf.
//   - selector: a request's node_matchers and node, compiled once per
//     request (matcher.go).
//   - truncation note: TruncatedHeader, the metadata of a cut response.
//   - caller: who opens CSDS streams: a verified client certificate's
//     first URI SAN, else its first DNS SAN, else the remote IP address
//     (callers.go); each holds at most MaxStreamsPerCaller streams.
//
// Resource contents (generic_xds_configs.xds_config) are never included:
// the CSDS listener is reachable by anyone who passes the downstream TLS,
// who would otherwise read every client's configuration, Secrets included,
// regardless of the authorities' allow lists; and the contents would
// multiply a response's size by the resources' own. Names, versions and
// states are what an operator needs to tell who is behind or rejecting.
package csds
