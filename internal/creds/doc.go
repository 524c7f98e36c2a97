// Package creds owns credential rotation: the downstream listener's TLS
// (certificate pair and client CA), TLS toward origins (root CA and client
// certificate pair) and the bearer token sent to origins, each read from
// files at build time and read again when a file changes, so a rotated
// file needs no restart and no config reload. It also turns them into gRPC
// credentials toward origins (TLSCredentials, BearerCredentials).
//
// It receives config's sections (config.ServerTLS, config.ClientTLS, a
// token file) and imports no other package of the project; config does not
// import it (config's validation checks at load that the files exist and,
// for a token, that it is usable: config.ReadBearerToken).
//
// Words, as this package uses them:
//   - rotate: a file replaced on disk (typically by rename) while the relay
//     runs. "Reload" in this codebase means a config reload (SIGHUP,
//     config_watch, POST /debug/reload), never this.
//   - rotating value: one loaded from files and loaded again when any of
//     their size or modification time changes (rotating[T]); a file that
//     no longer stats or loads is reported and the value loaded before
//     stays in use.
//   - current: a value as the files are now, checked on each use (each
//     handshake, each stream), never by a goroutine of its own.
package creds
