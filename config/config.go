// Package config is the relay's YAML schema: plain structs, their defaults,
// strict loading (unknown keys are errors) and validation that reports every
// problem at once with its field path and line.
package config

import (
	"os"
	"time"

	"github.com/xds-relay/xds-relay/internal/access"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Config is the whole relay configuration. The YAML keys are the field tags;
// users and tools depend on them, so they do not change.
type Config struct {
	// Listen is the downstream xDS gRPC address (host:port).
	// Default "127.0.0.1:18000".
	Listen string `yaml:"listen"`
	// Admin is the HTTP address of /metrics, /healthz, /readyz and /debug/.
	// Default "127.0.0.1:18001".
	Admin string `yaml:"admin"`
	// RESTListen is the HTTP address of REST-JSON polling (POST
	// /v3/discovery:<kind>), with downstream.tls and the same access
	// control as xDS. Default "": REST-JSON polling is off.
	RESTListen string `yaml:"rest_listen"`
	// CSDSListen is the gRPC address of Client Status Discovery
	// (envoy.service.status.v3.ClientStatusDiscoveryService): what each
	// connected client was sent and whether it ACKed it. Served with
	// downstream.tls (client certificates required when ca_file is set)
	// and downstream's keepalive and message limits. Needs a restart to
	// change. Default "": off.
	CSDSListen string `yaml:"csds_listen"`
	// CSDSAllow lists who may call CSDS, by client certificate (entries
	// with exactly one of uri_san, dns_san; any matching allows). CSDS
	// lists every connected client's node and resource names, whatever
	// authority they belong to, so when an authority restricts its
	// readers (allow, allow_by_type) csds_listen requires this list and
	// client certificates (downstream.tls.ca_file). Needs a restart to
	// change. Default: empty (every caller that passes downstream.tls).
	CSDSAllow []access.AllowEntry `yaml:"csds_allow"`
	// CSDSMaxStreamsPerCaller bounds the StreamClientStatus streams one
	// caller (the verified client certificate's first URI SAN, else its
	// first DNS SAN, else its IP address) keeps open at once; one more is
	// refused with RESOURCE_EXHAUSTED. Each stream can keep up to two
	// reports of about 3 MiB while its caller does not read. Needs a
	// restart to change. Default 4.
	CSDSMaxStreamsPerCaller int `yaml:"csds_max_streams_per_caller"`
	// AdminPprof serves Go runtime profiles (/debug/pprof/) on the admin
	// listener. Default false.
	AdminPprof bool `yaml:"admin_pprof"`
	// AdminAllowedHosts are the names, besides IP literals and localhost,
	// that the admin listener answers as a request's Host (any port): a
	// request naming another host gets 403, so a web page cannot read the
	// admin pages through DNS rebinding. E.g. the admin Service's DNS
	// name. Default []: IP literals and localhost only.
	AdminAllowedHosts []string `yaml:"admin_allowed_hosts"`
	// ConfigWatch: the relay watches its config file (and the file's
	// directory, for renames and Kubernetes ConfigMap symlink swaps) and
	// reloads it when its content changes, as SIGHUP does: a file that
	// does not validate is refused and logged, the running config kept.
	// Needs a restart to change. Default false.
	ConfigWatch bool `yaml:"config_watch"`
	// Node is the identity the relay presents to origins on xdstp streams.
	Node Node `yaml:"node"`
	// ControlPlaneID is what every response to a client carries in
	// control_plane.identifier, so an operator can tell which relay served
	// a proxy. Default "": the host name.
	ControlPlaneID string `yaml:"control_plane_id"`
	// Authorities lists the authorities the relay serves and where their
	// resources come from. At least one is required; no default.
	Authorities []Authority `yaml:"authorities"`
	// Cache bounds what the relay keeps that no client watches.
	Cache Cache `yaml:"cache"`
	// Aggregation groups legacy (non-xdstp) names onto authorities.
	Aggregation Aggregation `yaml:"aggregation"`
	// Log configures the process logger.
	Log Log `yaml:"log"`
	// Downstream configures the gRPC server clients connect to.
	Downstream Downstream `yaml:"downstream"`
	// Upstream configures the streams to origin control planes.
	Upstream Upstream `yaml:"upstream"`
	// Delivery is safe delivery at the fan-out point: what the relay
	// checks and holds back of an origin's changes before its clients
	// get them (docs/delivery.md). authorities[].delivery overrides it
	// per authority, key by key.
	Delivery Delivery `yaml:"delivery"`
	// Propagation configures the propagation ledger: every origin change
	// traced to each client's ACK or NACK (docs/operations.md).
	Propagation Propagation `yaml:"propagation"`
	// ShutdownGracePeriod bounds a graceful shutdown: after it, remaining
	// streams and HTTP requests are cut. Default 10s.
	ShutdownGracePeriod time.Duration `yaml:"shutdown_grace_period"`

	// source names where the config came from ("" when built in code);
	// lines maps field paths to YAML lines. Both read-only after Parse.
	source string
	lines  lineIndex
}

// Node is the identity the relay presents to origins for xdstp streams.
// Streams of legacy names use the node their aggregation rule sets, or one
// of only the node fields their group key is built from.
type Node struct {
	// ID is node.id. Default "xds-relay".
	ID string `yaml:"id"`
	// Cluster is node.cluster. Default "" (not sent).
	Cluster string `yaml:"cluster"`
}

// GlobCollections values: whether an authority's origins understand TP1 glob
// collections.
const (
	GlobNative   = "native"
	GlobEmulated = "emulated"
)

// FileOriginPrefix marks an origin that is a directory of resource files
// rather than a control plane: "file://DIR".
const FileOriginPrefix = "file://"

// Authority is one authority the relay serves: xdstp names whose authority
// equals Name, and legacy names that aggregation rules assign to it.
type Authority struct {
	// Name is the xdstp authority (an opaque string: no '/', '?', '#' or
	// white space). An authority used only by aggregation rules for legacy
	// names may have any such name. Required.
	Name string `yaml:"name"`
	// Origins are control planes ("host:port") or file sources ("file://DIR",
	// DIR relative to the working directory) in failover order: the relay
	// uses the first that answers. Required.
	Origins []string `yaml:"origins"`
	// Transport is the upstream variant: "delta" or "sotw" (ADS), or
	// "delta-per-type" or "sotw-per-type" (one stream per type on the
	// per-type services, for origins without ADS). Default "delta".
	Transport string `yaml:"transport"`
	// GlobCollections is "native" when the origins serve glob collections,
	// "emulated" when the relay must subscribe to the type's wildcard and
	// compute glob membership itself. Default "native" with transport
	// delta and delta-per-type, "emulated" with sotw and sotw-per-type (say "native" for a SotW origin that
	// serves globs, such as another relay).
	GlobCollections string `yaml:"glob_collections"`
	// Types are the type URLs the relay asks this authority's origins for;
	// a client's name of another type is answered as not existing and
	// never reaches an origin. Default: every type the relay serves
	// (docs/protocol.md, "Served variants and types").
	Types []string `yaml:"types"`
	// Allow lists who may subscribe to this authority's names (any entry
	// matching allows; an entry is access.AllowEntry: exactly one of uri_san,
	// dns_san, node_id, node_cluster). Default: absent, every client may.
	Allow []access.AllowEntry `yaml:"allow"`
	// AllowByType: for each type URL listed, a list that replaces Allow
	// (so Secrets can be narrower). Default none.
	AllowByType map[string][]access.AllowEntry `yaml:"allow_by_type"`
	// TLS secures connections to this authority's origins, replacing
	// upstream.tls as a whole. Default: absent, upstream.tls applies.
	TLS *ClientTLS `yaml:"tls"`
	// BearerTokenFile holds a token sent as "authorization: Bearer
	// <token>" on each stream to this authority's origins, replacing
	// upstream.bearer_token_file. Default "": upstream.bearer_token_file.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// PlainNames: this authority serves the plain (non-xdstp) names no
	// aggregation rule matches (Envoy's wildcard LDS and CDS, RDS and EDS
	// by name), one upstream group per node cluster: the built-in rule
	// aggregation.PlainNamesRule, after the configured rules. At most one
	// authority says true; not allowed with a default rule. Default: true
	// for the only authority (false refuses plain names no rule matches),
	// false when there are several.
	PlainNames *bool `yaml:"plain_names"`
	// Delivery overrides the top-level delivery section for this
	// authority: each key set here replaces the top-level one (the same
	// keys). Default: absent, the top-level delivery applies as a whole.
	Delivery DeliveryOverride `yaml:"delivery"`
}

// Cache bounds the resources that no client watches any more (kept warm for
// reconnecting clients). Watched resources are never evicted.
type Cache struct {
	// MaxResources bounds the number of unwatched resources kept; 0 keeps
	// none. Default 100000.
	MaxResources int `yaml:"max_resources"`
	// MaxBytes bounds the bytes they take: bodies, names, versions,
	// wrapper fields (metadata, aliases, cache control), TTLs, resource
	// errors and a fixed overhead per revision (docs/limits.md, "What
	// cache.max_bytes counts"); 0 keeps none. Default 256MiB.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// RefetchInterval: a resource the origin marked
	// cache_control.do_not_cache is asked of the origin for new clients at
	// most once per this interval, per name; a client arriving sooner
	// waits for that fetch (never served from cache). 0: no limit.
	// Default 1s.
	RefetchInterval time.Duration `yaml:"refetch_interval"`
	// SnapshotPath is the file the relay keeps a snapshot of its cache in
	// and restores it from at start (warm restart). Default "": off.
	SnapshotPath string `yaml:"snapshot_path"`
	// SnapshotInterval: the snapshot is written at most this often, when
	// the cache changed, and at shutdown. Default 5s.
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`
	// SnapshotMaxBytes bounds the snapshot file; what does not fit (the
	// least recently used resources) is left out. Default 256MiB.
	SnapshotMaxBytes ByteSize `yaml:"snapshot_max_bytes"`
}

// Delivery is the delivery section (docs/delivery.md): checks and holds
// on origin changes at the fan-out point, before any client gets them.
// Reloadable: a reload applies to the next origin change.
type Delivery struct {
	// Validate checks each new origin version of a resource, once, against
	// the validation rules of its proto (the generated ValidateAll of the
	// resource's type, for every type the relay can decode that has one):
	// an invalid version is not cached nor sent to any client (they keep
	// what they had), and the origin gets a NACK naming the resource and
	// the field. Default true.
	Validate bool `yaml:"validate"`
	// DeletionGuard holds back an origin change that would remove much of
	// what clients have.
	DeletionGuard DeletionGuard `yaml:"deletion_guard"`
	// NackBreaker holds back a version that clients reject.
	NackBreaker NackBreaker `yaml:"nack_breaker"`
	// Waves, when set, roll each changed version out to one wave of
	// clients after another, each next wave once the previous ACKed it
	// (AckShare within MaxWait) and no breaker tripped, then to everyone.
	// Default none: every client at once.
	Waves []Wave `yaml:"waves"`
	// AckShare: a wave is done once this share (0 to 1, above 0) of its
	// clients subscribing to the change ACKed it; a version is accepted
	// once this share of the client streams it was sent to ACKed it (its
	// rollout ends, the last accepted version kept beside it is
	// dropped). Default 0.99.
	AckShare float64 `yaml:"ack_share"`
	// MaxWait: a wave not done this long after it opened stops the
	// rollout (held, until released by hand); a version still not
	// accepted this long after its last wave opened is taken as accepted.
	// Default 60s.
	MaxWait time.Duration `yaml:"max_wait"`
}

// NackBreaker is delivery.nack_breaker: once Clients distinct clients
// (node ids) NACK responses carrying a version of a resource during its
// rollout, that version is held (docs/delivery.md, "The NACK breaker").
type NackBreaker struct {
	// Clients: how many distinct clients' NACKs trip the breaker; 0 turns
	// it off. A relay below that tripped its own counts as enough.
	// Default 3.
	Clients int `yaml:"clients"`
}

// Wave is one entry of delivery.waves: the clients it has, by share of
// the fleet (a stable hash of the node id) or by node cluster, and how
// long it runs at least before the next wave opens.
type Wave struct {
	// Share of the connected fleet (above 0, at most 1), by a stable hash
	// of the node id; a wave of a share has at least one client.
	// Default: absent (then NodeClusters).
	Share float64 `yaml:"share"`
	// NodeClusters: the clients whose node cluster matches one of these
	// patterns ("*" matches any run of characters). Default: absent.
	NodeClusters []string `yaml:"node_clusters"`
	// MinWait: the wave runs at least this long before the next opens.
	// Default 0s.
	MinWait time.Duration `yaml:"min_wait"`
}

// DeletionGuard is delivery.deletion_guard: an origin change (or the first
// state after an upstream reconnect or failover) that would remove more
// than MaxRemovedShare of one link's resources of one type, or empty a
// collection or wildcard clients subscribe to, is held: clients keep the
// resources and receive no removals until it is released.
type DeletionGuard struct {
	// MaxRemovedShare: a change removing more than this share (0 to 1) of
	// the resources of one type on one link is held; 1 turns the guard off
	// (emptied collections included). Default 0.5.
	MaxRemovedShare float64 `yaml:"max_removed_share"`
	// MinResources: types with fewer resources than this on a link are
	// exempt from the share (not from emptying a collection or wildcard).
	// Default 10.
	MinResources int `yaml:"min_resources"`
	// ReleaseAfter: held removals are applied once the origin has gone on
	// without those resources this long (it did not send them again);
	// 0: only by hand (POST /debug/delivery/release). Default 0.
	ReleaseAfter time.Duration `yaml:"release_after"`
}

// DeliveryOverride is authorities[].delivery: the keys of Delivery, each
// replacing the top-level value when set (DeliveryOf).
type DeliveryOverride struct {
	// Validate replaces delivery.validate. Default: absent.
	Validate *bool `yaml:"validate"`
	// DeletionGuard replaces delivery.deletion_guard's keys one by one.
	DeletionGuard DeletionGuardOverride `yaml:"deletion_guard"`
	// NackBreaker replaces delivery.nack_breaker's keys.
	NackBreaker NackBreakerOverride `yaml:"nack_breaker"`
	// Waves replaces delivery.waves, the whole list (an empty list: every
	// client at once). Default: absent.
	Waves *[]Wave `yaml:"waves"`
	// AckShare replaces delivery.ack_share. Default: absent.
	AckShare *float64 `yaml:"ack_share"`
	// MaxWait replaces delivery.max_wait. Default: absent.
	MaxWait *time.Duration `yaml:"max_wait"`
}

// NackBreakerOverride is authorities[].delivery.nack_breaker.
type NackBreakerOverride struct {
	// Clients replaces delivery.nack_breaker.clients. Default: absent.
	Clients *int `yaml:"clients"`
}

// DeletionGuardOverride is authorities[].delivery.deletion_guard.
type DeletionGuardOverride struct {
	// MaxRemovedShare replaces delivery.deletion_guard.max_removed_share.
	// Default: absent.
	MaxRemovedShare *float64 `yaml:"max_removed_share"`
	// MinResources replaces delivery.deletion_guard.min_resources.
	// Default: absent.
	MinResources *int `yaml:"min_resources"`
	// ReleaseAfter replaces delivery.deletion_guard.release_after.
	// Default: absent.
	ReleaseAfter *time.Duration `yaml:"release_after"`
}

// Propagation configures the propagation ledger (internal/propagation):
// for each origin change, when it arrived and how many client streams
// ACKed it (and how fast), NACKed it (and why) or are still pending, on
// /debug/propagation, the status page and in xds_relay_propagation_*;
// and, per client, why it is behind (/debug/propagation/client?node=).
type Propagation struct {
	// Enabled keeps the ledger. Off, no change is recorded (the pages are
	// empty and the xds_relay_propagation_* series are not exported):
	// only to compare its cost. Needs a restart to change. Default true.
	Enabled bool `yaml:"enabled"`
	// ReportAfter: a change that has not converged this long after it
	// arrived (a client stream has not answered it) is logged once, with
	// the number of streams still pending; one that converges sooner is
	// logged then. Needs a restart to change. Default 30s.
	ReportAfter time.Duration `yaml:"report_after"`
}

// Aggregation holds the rules that group legacy names. The rule schema is
// the aggregation package's.
type Aggregation struct {
	// Rules are tried in order; the first match wins. Default none.
	Rules []aggregation.Rule `yaml:"rules"`
}

// Log levels and formats.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"

	LogJSON    = "json"
	LogConsole = "console"
)

// What happens to a slow client (downstream.slow_clients).
const (
	SlowClientsPark       = "park"
	SlowClientsDisconnect = "disconnect"
)

// Log configures the process logger (written to stderr).
type Log struct {
	// Level is debug, info, warn or error. Default "info".
	Level string `yaml:"level"`
	// Format is json or console. Default "json".
	Format string `yaml:"format"`
}

// Downstream configures the gRPC server that xDS clients connect to.
type Downstream struct {
	// TLS secures the listener. Default: plaintext.
	TLS ServerTLS `yaml:"tls"`
	// Keepalive configures HTTP/2 pings on client connections.
	Keepalive ServerKeepalive `yaml:"keepalive"`
	// MaxRecvMsgSize bounds one request from a client. Default 16MiB.
	MaxRecvMsgSize ByteSize `yaml:"max_recv_msg_size"`
	// MaxSendMsgSize bounds one response to a client: one that would be
	// larger is sent as several, except a SotW state-of-the-world response
	// (LDS, CDS), which cannot be split and is not sent (docs/limits.md).
	// Default 64MiB.
	MaxSendMsgSize ByteSize `yaml:"max_send_msg_size"`
	// SendTimeout is how long one send to a client may wait on a client
	// that does not read (its HTTP/2 window is full) before the client
	// counts as slow; SlowClients says what then happens. Default 30s.
	SendTimeout time.Duration `yaml:"send_timeout"`
	// SlowClients is what happens to a slow client (see SendTimeout):
	// "park" keeps its stream and, once it reads again, sends it the
	// newest state in one response per type; while parked it costs its
	// HTTP/2 window and what it subscribes to, never a queue of changes,
	// and delays no one. "disconnect" ends its stream with
	// ResourceExhausted (it reconnects). Default "park".
	SlowClients string `yaml:"slow_clients"`
	// FetchWait is how long a REST-JSON poll or unary Fetch waits for
	// resources the relay has not received yet before it answers with
	// what is known (or 503 while no origin answers); also how long a
	// long poll with a current version_info waits for a change (then
	// 304). Default 5s. Needs a restart to change.
	FetchWait time.Duration `yaml:"fetch_wait"`
	// GatherWindow: when a request subscribes to names the relay has not
	// received yet (a cold relay, or names new to it), the client's
	// response of that type waits until every name the request added is
	// resolved (present or absent), so they arrive in one response, but
	// at most this long; then what is known goes out and the rest as it
	// comes. Changes to other names are never kept back. 0 = no wait.
	// Default 2s. Needs a restart to change.
	GatherWindow time.Duration `yaml:"gather_window"`
	// Limits bound what one client can make the relay keep.
	Limits Limits `yaml:"limits"`
	// REST bounds the time of REST-JSON polls (rest_listen).
	REST RESTPolling `yaml:"rest"`
	// MaxConnectionAge: a client connection older than this is sent a
	// GOAWAY, so a fleet rebalances across relay replicas; gRPC jitters
	// it by ±10% per connection. 0 = off. Default 30m. Needs a restart to
	// change.
	MaxConnectionAge time.Duration `yaml:"max_connection_age"`
	// MaxConnectionAgeGrace: how long a connection's streams may go on
	// after that GOAWAY before the connection is closed (the client sees
	// Unavailable and reconnects). Default 1m. Needs a restart to change.
	MaxConnectionAgeGrace time.Duration `yaml:"max_connection_age_grace"`
	// DrainDelay: on shutdown, how long readiness (/readyz, gRPC health)
	// reports not serving before any stream is ended, so load balancers
	// stop sending new clients; streams, old and new, are served
	// meanwhile. 0 = none. Default 5s.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// DrainWaves: after DrainDelay, the streams are ended in this many
	// waves, not all at once, so a fleet does not reconnect at one
	// instant. Default 4.
	DrainWaves int `yaml:"drain_waves"`
	// DrainDuration spreads the waves: one every DrainDuration/DrainWaves,
	// the first at once. Bounded by half the shutdown_grace_period.
	// Default 4s.
	DrainDuration time.Duration `yaml:"drain_duration"`
	// NodeIdentity, when set, ties a client's node to its certificate: one
	// URI SAN of the client's verified certificate must match this pattern
	// with "{cluster}" and "{id}" replaced by the node's cluster and id
	// ('*' is a glob), e.g. "spiffe://fleet.example/ns/*/sa/{cluster}", so
	// no client joins another cluster's aggregation group by claiming it.
	// Needs downstream.tls.ca_file. Default "": off.
	NodeIdentity string `yaml:"node_identity"`
}

// Limits bound what clients control. A stream that goes past one is ended
// with a status that names the limit, and counted in
// xds_relay_downstream_limit_rejections_total{limit}.
type Limits struct {
	// MaxStreams bounds client streams in total; one more is refused with
	// ResourceExhausted. Default 100000.
	MaxStreams int `yaml:"max_streams"`
	// MaxStreamsPerConnection is HTTP/2 MAX_CONCURRENT_STREAMS on each
	// client connection (the client sees one more refused). Default 1000.
	MaxStreamsPerConnection int `yaml:"max_streams_per_connection"`
	// MaxNamesPerStream bounds the names one stream makes the relay keep,
	// all types together: subscribed ones of any authority and state
	// (served, unknown, denied, type not carried) and those declared in
	// initial_resource_versions (ResourceExhausted). Default 10000.
	MaxNamesPerStream int `yaml:"max_names_per_stream"`
	// MaxNameLength bounds one resource name in a request, in bytes
	// (InvalidArgument). Default 2048.
	MaxNameLength int `yaml:"max_name_length"`
	// MaxTypesPerStream bounds the type URLs one ADS stream uses
	// (ResourceExhausted). Default 32.
	MaxTypesPerStream int `yaml:"max_types_per_stream"`
	// MaxVersionLength bounds one version string a client sends, in bytes:
	// a SotW version_info, a value of initial_resource_versions, a
	// response_nonce (InvalidArgument). Default 256.
	MaxVersionLength int `yaml:"max_version_length"`
	// MaxGroupsPerAuthority bounds the upstream links (one per
	// aggregation group, one for the authority's xdstp names) an authority
	// may have open, each one origin stream; a request that would open one
	// more is refused with ResourceExhausted, and a link closed as idle
	// gives its place back. Default 256.
	MaxGroupsPerAuthority int `yaml:"max_groups_per_authority"`
	// MaxNewGroupsPerStream bounds the upstream links one client stream
	// may cause to open over its life (groups that no client used
	// before); past it the stream ends with ResourceExhausted. Groups that
	// exist cost nothing. Default 16.
	MaxNewGroupsPerStream int `yaml:"max_new_groups_per_stream"`
	// RequestsPerSecond and RequestBurst are each stream's request budget,
	// a token bucket: RequestBurst requests at once, then
	// RequestsPerSecond. A stream over it is not ended: the relay reads
	// its next request later (backpressure; nothing is dropped). An
	// answer (ACK or NACK) to a response the relay sent that changes no
	// subscription is free, once per response; every other request
	// costs one. Defaults 50 and 500.
	RequestsPerSecond int `yaml:"requests_per_second"`
	RequestBurst      int `yaml:"request_burst"`
}

// RESTPolling bounds REST-JSON polls (rest_listen). A poll also takes one
// of the max_streams places while it is served, its body read included.
type RESTPolling struct {
	// ReadTimeout bounds reading one request, headers and body. Default 10s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds a poll from the end of its headers to the end of
	// its response, the long-poll wait (5s) included. Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long between
	// polls. Default 1m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// ServerTLS is the downstream listener's TLS. TLS is on when CertFile is set.
// The certificate pair and the CA file are re-read when their files change
// (internal/creds: rotation needs no restart; open connections are kept).
type ServerTLS struct {
	// CertFile is a PEM certificate chain. Default "" (plaintext).
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile. Required with CertFile.
	KeyFile string `yaml:"key_file"`
	// CAFile, when set, makes client certificates mandatory and verified
	// against these PEM roots (mutual TLS). Default "" (no client certs).
	CAFile string `yaml:"ca_file"`
}

// Enabled reports whether the listener uses TLS.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" }

// ServerKeepalive configures HTTP/2 keepalive on downstream connections.
type ServerKeepalive struct {
	// Time: the server pings a client connection idle this long. Default 1m.
	Time time.Duration `yaml:"time"`
	// Timeout: a ping unanswered this long closes the connection. Default 20s.
	Timeout time.Duration `yaml:"timeout"`
	// MinClientPingInterval: clients pinging more often than this are
	// disconnected (GOAWAY "too_many_pings"). Pings are allowed without
	// active streams. Default 30s.
	MinClientPingInterval time.Duration `yaml:"min_client_ping_interval"`
}

// Upstream configures the relay's streams to origin control planes.
type Upstream struct {
	// TLS secures connections to origins; an authority's own tls
	// replaces it. Default: plaintext.
	TLS ClientTLS `yaml:"tls"`
	// BearerTokenFile holds a token (at most MaxBearerTokenSize bytes,
	// white space around it trimmed) sent as "authorization: Bearer
	// <token>" on each stream to origins; the file is re-read when it
	// changes, and an authority's own bearer_token_file replaces it.
	// Default "": no token.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// AllowPlaintextBearerToken lets a token go to origins without TLS,
	// where anyone on the path can read it. Default false: a token
	// without TLS is a config error.
	AllowPlaintextBearerToken bool `yaml:"allow_plaintext_bearer_token"`
	// Keepalive configures HTTP/2 pings toward origins.
	Keepalive ClientKeepalive `yaml:"keepalive"`
	// MaxRecvMsgSize bounds one response from an origin. Default 64MiB.
	MaxRecvMsgSize ByteSize `yaml:"max_recv_msg_size"`
	// MaxSendMsgSize bounds one request to an origin. Default 16MiB.
	MaxSendMsgSize ByteSize `yaml:"max_send_msg_size"`
	// MaxRequestSize: a delta subscription request larger than this is
	// split into several (origins commonly refuse requests over 4 MiB, and
	// a reconnect carries every subscribed name). At most
	// max_send_msg_size. Default 1MiB.
	MaxRequestSize ByteSize `yaml:"max_request_size"`
	// ResponseTimeout bounds the wait for an origin's first response on a
	// stream the relay asked something on; an origin that accepts the
	// stream and does not answer in time is failed over. Default 10s.
	ResponseTimeout time.Duration `yaml:"response_timeout"`
	// IdleTimeout: an upstream link (an authority's, or an aggregation
	// group's) whose keys no client has watched for this long is closed,
	// its connection given back and what it cached forgotten. Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ConnectTimeout bounds connecting to one origin before the next is
	// tried. Default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// Backoff paces reconnects to an authority.
	Backoff Backoff `yaml:"backoff"`
	// FailbackInterval: while an authority's stream is served by an origin
	// other than its first, the first is probed this often; once it
	// accepts a connection the stream moves back to it. Default 5m.
	FailbackInterval time.Duration `yaml:"failback_interval"`
}

// ClientTLS is TLS toward origins. The client certificate pair and the CA
// file are re-read when their files change (internal/creds: new connections use them;
// open ones are kept).
type ClientTLS struct {
	// Enabled turns TLS on. Default false (plaintext).
	Enabled bool `yaml:"enabled"`
	// CAFile holds the PEM roots that verify origins. Default "": the
	// system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the relay's client certificate (mutual TLS).
	// Default "": none. Set both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name verified in origin certificates.
	// Default "": the origin's host.
	ServerName string `yaml:"server_name"`
}

// ClientKeepalive configures HTTP/2 keepalive toward origins.
type ClientKeepalive struct {
	// Time: the relay pings an origin connection idle this long. It must
	// not be below the minimum ping interval the origin enforces, or the
	// origin closes the connection (GOAWAY too_many_pings): gRPC servers
	// enforce 5m unless configured otherwise, which is why the default
	// matches it (as grpc-go's own xDS client does). Lower it only for
	// origins that permit it. Default 5m.
	Time time.Duration `yaml:"time"`
	// Timeout: a ping unanswered this long closes the connection and
	// triggers failover. Default 20s.
	Timeout time.Duration `yaml:"timeout"`
}

// Backoff paces reconnect attempts: the n-th wait is
// min(Initial*Multiplier^n, Max), randomised by ±Jitter of itself.
type Backoff struct {
	// Initial is the first wait. Default 250ms.
	Initial time.Duration `yaml:"initial"`
	// Max caps the wait. Default 30s.
	Max time.Duration `yaml:"max"`
	// Multiplier grows the wait after each failed attempt. Default 2.
	Multiplier float64 `yaml:"multiplier"`
	// Jitter is the random fraction, in [0, 1], applied to each wait.
	// Default 0.2.
	Jitter float64 `yaml:"jitter"`
}

// Defaults.
const (
	DefaultListen              = "127.0.0.1:18000"
	DefaultAdmin               = "127.0.0.1:18001"
	DefaultNodeID              = "xds-relay"
	DefaultMaxResources        = 100000
	DefaultMaxBytes            = 256 * MiB
	DefaultSnapshotInterval    = 5 * time.Second
	DefaultSnapshotMaxBytes    = 256 * MiB
	DefaultRefetchInterval     = time.Second
	DefaultShutdownGracePeriod = 10 * time.Second
	// DefaultCSDSMaxStreamsPerCaller: csds_max_streams_per_caller.
	DefaultCSDSMaxStreamsPerCaller = 4
	DefaultSendTimeout             = 30 * time.Second
	DefaultSlowClients             = SlowClientsPark
	DefaultFetchWait               = 5 * time.Second
	DefaultGatherWindow            = 2 * time.Second
	DefaultDownstreamMaxRecv       = 16 * MiB
	DefaultDownstreamMaxSend       = 64 * MiB
	DefaultUpstreamMaxRecv         = 64 * MiB
	DefaultUpstreamMaxSend         = 16 * MiB
	DefaultUpstreamMaxRequest      = 1 * MiB
	DefaultUpstreamIdleTimeout     = 5 * time.Minute
	DefaultResponseTimeout         = 10 * time.Second
	DefaultServerKeepaliveTime     = time.Minute
	DefaultKeepaliveTimeout        = 20 * time.Second
	DefaultMinClientPingInterval   = 30 * time.Second
	DefaultClientKeepaliveTime     = 5 * time.Minute
	DefaultConnectTimeout          = 5 * time.Second
	DefaultBackoffInitial          = 250 * time.Millisecond
	DefaultBackoffMax              = 30 * time.Second
	DefaultBackoffMultiplier       = 2.0
	DefaultBackoffJitter           = 0.2
	DefaultFailbackInterval        = 5 * time.Minute

	DefaultMaxConnectionAge      = 30 * time.Minute
	DefaultMaxConnectionAgeGrace = time.Minute
	DefaultDrainDelay            = 5 * time.Second
	DefaultDrainWaves            = 4
	DefaultDrainDuration         = 4 * time.Second

	DefaultMaxStreams              = 100000
	DefaultMaxStreamsPerConnection = 1000
	DefaultMaxNamesPerStream       = 10000
	DefaultMaxNameLength           = 2048
	DefaultMaxTypesPerStream       = 32
	DefaultMaxVersionLength        = 256
	DefaultMaxGroupsPerAuthority   = 256
	DefaultMaxNewGroupsPerStream   = 16
	DefaultRequestsPerSecond       = 50
	DefaultRequestBurst            = 500

	DefaultMaxRemovedShare        = 0.5
	DefaultMinResources           = 10
	DefaultNackBreakerClients     = 3
	DefaultAckShare               = 0.99
	DefaultMaxWait                = 60 * time.Second
	DefaultPropagationReportAfter = 30 * time.Second

	DefaultRESTReadTimeout  = 10 * time.Second
	DefaultRESTWriteTimeout = 30 * time.Second
	DefaultRESTIdleTimeout  = time.Minute
)

// Default returns a Config holding every default and no authorities (so it
// does not validate until one is added).
func Default() *Config {
	return &Config{
		Listen:              DefaultListen,
		Admin:               DefaultAdmin,
		Node:                Node{ID: DefaultNodeID},
		Cache:               defaultCache(),
		Log:                 Log{Level: LogInfo, Format: LogJSON},
		Downstream:          defaultDownstream(),
		Upstream:            defaultUpstream(),
		Delivery:            DefaultDelivery(),
		Propagation:         Propagation{Enabled: true, ReportAfter: DefaultPropagationReportAfter},
		ShutdownGracePeriod: DefaultShutdownGracePeriod,

		CSDSMaxStreamsPerCaller: DefaultCSDSMaxStreamsPerCaller,
	}
}

// defaultCache is the cache section's defaults.
func defaultCache() Cache {
	return Cache{
		MaxResources: DefaultMaxResources,
		MaxBytes:     DefaultMaxBytes,

		RefetchInterval: DefaultRefetchInterval,

		SnapshotInterval: DefaultSnapshotInterval,
		SnapshotMaxBytes: DefaultSnapshotMaxBytes,
	}
}

// defaultDownstream is the downstream section's defaults.
func defaultDownstream() Downstream {
	return Downstream{
		Keepalive: ServerKeepalive{
			Time:                  DefaultServerKeepaliveTime,
			Timeout:               DefaultKeepaliveTimeout,
			MinClientPingInterval: DefaultMinClientPingInterval,
		},
		MaxRecvMsgSize: DefaultDownstreamMaxRecv,
		MaxSendMsgSize: DefaultDownstreamMaxSend,
		SendTimeout:    DefaultSendTimeout,
		SlowClients:    DefaultSlowClients,
		FetchWait:      DefaultFetchWait,
		GatherWindow:   DefaultGatherWindow,

		MaxConnectionAge:      DefaultMaxConnectionAge,
		MaxConnectionAgeGrace: DefaultMaxConnectionAgeGrace,
		DrainDelay:            DefaultDrainDelay,
		DrainWaves:            DefaultDrainWaves,
		DrainDuration:         DefaultDrainDuration,
		Limits: Limits{
			MaxStreams:              DefaultMaxStreams,
			MaxStreamsPerConnection: DefaultMaxStreamsPerConnection,
			MaxNamesPerStream:       DefaultMaxNamesPerStream,
			MaxNameLength:           DefaultMaxNameLength,
			MaxTypesPerStream:       DefaultMaxTypesPerStream,
			MaxVersionLength:        DefaultMaxVersionLength,
			MaxGroupsPerAuthority:   DefaultMaxGroupsPerAuthority,
			MaxNewGroupsPerStream:   DefaultMaxNewGroupsPerStream,
			RequestsPerSecond:       DefaultRequestsPerSecond,
			RequestBurst:            DefaultRequestBurst,
		},
		REST: RESTPolling{
			ReadTimeout:  DefaultRESTReadTimeout,
			WriteTimeout: DefaultRESTWriteTimeout,
			IdleTimeout:  DefaultRESTIdleTimeout,
		},
	}
}

// defaultUpstream is the upstream section's defaults.
func defaultUpstream() Upstream {
	return Upstream{
		Keepalive: ClientKeepalive{
			Time:    DefaultClientKeepaliveTime,
			Timeout: DefaultKeepaliveTimeout,
		},
		MaxRecvMsgSize:  DefaultUpstreamMaxRecv,
		MaxSendMsgSize:  DefaultUpstreamMaxSend,
		MaxRequestSize:  DefaultUpstreamMaxRequest,
		IdleTimeout:     DefaultUpstreamIdleTimeout,
		ResponseTimeout: DefaultResponseTimeout,
		ConnectTimeout:  DefaultConnectTimeout,
		Backoff: Backoff{
			Initial:    DefaultBackoffInitial,
			Max:        DefaultBackoffMax,
			Multiplier: DefaultBackoffMultiplier,
			Jitter:     DefaultBackoffJitter,
		},
		FailbackInterval: DefaultFailbackInterval,
	}
}

// ApplyAuthorityDefaults fills the per-entry defaults YAML left empty:
// Load calls it, and so does a test that builds a config in code
// (integration's relay-and-origin harness).
func (c *Config) ApplyAuthorityDefaults() {
	for i := range c.Authorities {
		a := &c.Authorities[i]
		if a.Transport == "" {
			a.Transport = xdstype.TransportDelta
		}
		if a.GlobCollections == "" {
			a.GlobCollections = GlobNative
			if a.Transport == xdstype.TransportSotW || a.Transport == xdstype.TransportSotWPerType {
				a.GlobCollections = GlobEmulated
			}
		}
	}
}

// Authority returns the authority entry named name.
func (c *Config) Authority(name string) (Authority, bool) {
	for _, a := range c.Authorities {
		if a.Name == name {
			return a, true
		}
	}
	return Authority{}, false
}

// AuthorityNames lists the configured authority names in order.
// ControlPlaneIdentifier is control_plane_id, or by default the host name
// ("xds-relay" if the system has none to give).
func (c *Config) ControlPlaneIdentifier() string {
	if c.ControlPlaneID != "" {
		return c.ControlPlaneID
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return DefaultNodeID
}

// AuthorityTypes returns, for each authority that lists its types, those
// type URLs (authorities without a list carry every served type).
func (c *Config) AuthorityTypes() map[string][]string {
	out := make(map[string][]string)
	for _, a := range c.Authorities {
		if len(a.Types) > 0 {
			out[a.Name] = a.Types
		}
	}
	return out
}

func (c *Config) AuthorityNames() []string {
	names := make([]string, 0, len(c.Authorities))
	for _, a := range c.Authorities {
		names = append(names, a.Name)
	}
	return names
}

// Source names where the config was read from ("" when built in code).
func (c *Config) Source() string { return c.source }
