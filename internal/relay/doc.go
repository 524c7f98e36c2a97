// Package relay is the xds-relay process as a library: New builds every
// component from a config.Config, Start binds the listeners and serves,
// Close drains and shuts everything down within the grace period.
// cmd/xds-relay and the integration tests both start the relay through it.
//
// What it does, by file (README.md has the lifecycle and the seams):
//   - relay.go: Relay (New, Start, Failed, Close) and the seams components
//     plug into (goRun, onStop, readyCheck, onReload); lifecycle.go: its
//     one phase (new, serving, draining, stopping, closed) and the one
//     teardown path for every way out.
//   - components.go: the cache, upstream and downstream built from the
//     config and wired together, with warm restart (internal/snapshot)
//     loaded in New and written by a goRun loop and at Close.
//   - grpc.go: the downstream gRPC server's options (keepalive, message
//     sizes, TLS from internal/creds); upstreamauth.go: each authority's
//     upstream TLS and bearer token; rest.go: REST-JSON polling on
//     rest_listen; csds.go: Client Status Discovery, its csds_listen
//     listener bound by Start like every other and handed to it.
//   - drain.go: every stream registered so Close can end them in waves.
//   - reload.go, reloadhooks.go, configwatch.go: Reload (SIGHUP, POST
//     /debug/reload, config_watch) validates a new config and applies it
//     through the hooks that claim its fields; any other change is refused.
//   - the admin listener: relay binds and serves it; every route and
//     page on it is internal/admin's (New with the relay's readiness,
//     reload and log level; AddPages with the components, in
//     buildComponents).
//   - logging.go: NewLogger, zap from the log section; metrics.go:
//     NewRegistry and the process-level series; errors.go: the sentinels.
package relay
