// Package relay is the xds-relay process as a library: New builds every
// component from a config.Config, Start binds the listeners and serves,
// Close drains and shuts everything down within the grace period.
// cmd/xds-relay and the integration tests both start the relay through it.
//
// What it does, by file (README.md has the lifecycle and the seams):
//   - relay.go: Relay, its lifecycle (New, Start, Failed, Close) and the
//     seams components plug into (goRun, onStop, readyCheck, onReload).
//   - components.go: the cache, upstream and downstream built from the
//     config and wired together; snapshot.go: warm restart (the cache
//     snapshot restored in New, written periodically and at Close).
//   - grpc.go: the downstream gRPC server's options (keepalive, message
//     sizes, TLS); upstreamauth.go: each authority's upstream TLS and
//     bearer token; rest.go: REST-JSON polling on rest_listen, and pprof;
//     csds.go: Client Status Discovery on csds_listen and /debug/csds.
//   - drain.go: every stream registered so Close can end them in waves.
//   - reload.go, reloadhooks.go, configwatch.go: Reload (SIGHUP, POST
//     /debug/reload, config_watch) validates a new config and applies it
//     through the hooks that claim its fields; any other change is refused.
//   - admin.go, adminguard.go, operations.go: the admin HTTP server
//     (/metrics, /healthz, /readyz, /debug/), what it trusts (Host and
//     Origin checks), and its state-changing endpoints (reload, log level).
//   - status.go, statuspage.go: the status page (/), /debug/status and the
//     other /debug pages.
//   - logging.go: NewLogger, zap from the log section; metrics.go:
//     NewRegistry and the process-level series; errors.go: the sentinels.
package relay
