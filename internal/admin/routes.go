package admin

import (
	"time"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/csds"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// Every route of the admin listener. New mounts the process's own (the
// first block), AddPages the components' pages; nothing else mounts one.
const (
	MetricsPath = "/metrics" // Prometheus metrics
	HealthzPath = "/healthz" // 200 while the process runs
	ReadyzPath  = "/readyz"  // 200 while the relay serves, 503 otherwise
	IndexPath   = "/debug/"  // this list of pages
	PprofPath   = "/debug/pprof/"
	// ReloadPath: POST re-reads the config file (Options.Reload).
	ReloadPath = "/debug/reload"
	// LogLevelPath: GET shows the log level; PUT sets it (?level=, or the
	// body: "debug" or {"level":"debug"}).
	LogLevelPath = "/debug/log_level"

	// StatusPagePath is the status page (HTML); StatusPath is the JSON of
	// everything it shows; StatusJSPath and StatusCSSPath its own files
	// (no external assets).
	StatusPagePath = "/"
	StatusPath     = "/debug/status"
	StatusJSPath   = "/assets/status.js"
	StatusCSSPath  = "/assets/status.css"
	// ConfigPath serves the running config, secrets redacted.
	ConfigPath = "/debug/config"
	// CachePath: cache.Inspect's listing (query: cache.ParseFilter's).
	CachePath = "/debug/cache"
	// UpstreamsPath: the JSON state of every upstream link.
	UpstreamsPath = "/debug/upstreams"
	// ClientsPath: the connected clients; NacksPath: the recent NACKs.
	ClientsPath = "/debug/clients"
	NacksPath   = "/debug/nacks"
	// CSDSPath: the CSDS report counted per client and type (csds Debug).
	CSDSPath = "/debug/csds"
	// DeliveryPath: GET, the delivery page (delivery Page).
	// DeliveryReleasePath: POST, release held removals (delivery
	// Release); authority and type, in the query or a form body, narrow
	// what is released.
	DeliveryPath        = "/debug/delivery"
	DeliveryReleasePath = "/debug/delivery/release"
	// PropagationPath: the propagation ledger's changes;
	// PropagationClientPath: one client's view (?node=ID): per resource,
	// what it was sent and ACKed, the newest version the relay holds, and
	// why they differ.
	PropagationPath       = "/debug/propagation"
	PropagationClientPath = "/debug/propagation/client"
)

// Sources are the components whose data the pages show; relay hands them
// to AddPages once they are built.
type Sources struct {
	// Config is the running config (it follows reloads).
	Config   func() *config.Config
	Cache    *cache.Cache
	Upstream *upstream.Manager
	Clients  *downstream.Server
	CSDS     *csds.Server
	Delivery *delivery.Delivery
	// Ledger is nil while propagation is off: its page is then empty.
	Ledger *propagation.Ledger
}

// AddPages mounts the components' pages, listed on /debug/ in this order.
// Call it once, before the relay serves.
func (s *Server) AddPages(src Sources) {
	s.handle(UpstreamsPath, "upstream links: authority, group, origin in use, state, last error, subscriptions, age of the last response (JSON)", upstreamsPage(src.Upstream))
	s.handle(ClientsPath, "connected xDS clients: node, variant, group keys, subscriptions (JSON)", clientsPage(src.Clients))
	s.handle(CSDSPath, "client status per connected client stream: resources ACKed, NACKed, sent, requested, by type (JSON; ?node_id=)", csdsPage(src.CSDS))
	s.addStatusPages(&statusSources{Sources: src, started: time.Now(), ready: s.ready}) // statuspage.go
	s.handle(CachePath, "cached keys: versions, watchers, bytes; ?prefix= ?authority= ?type= ?limit= (default 1000, at most 10000) (JSON)", cachePage(src.Cache))
	s.handle(NacksPath, "the latest 50 client NACKs with their error (JSON)", nacksPage(src.Clients))
	s.handle(ConfigPath, "the running config, secrets redacted (YAML; ?format=json)", configPage(src.Config, s.lg))
	s.handle(PropagationPath, "the latest origin changes and their convergence: ACKed, NACKed (why), pending, p50/p99 (JSON; ?authority= ?type= ?limit= ?buckets=1)", propagationPage(src.Ledger))
	s.handle(PropagationClientPath, "why is this client behind: per resource of a node's streams, the version sent, ACKed and newest, and why they differ (JSON; ?node=ID)", clientProgressPage(src.Clients))
	s.handle(DeliveryPath, "safe delivery: held removals and versions (why, since when, how many, which clients hold which version), rollouts wave by wave, invalid origin versions, settings (JSON)", deliveryPage(src.Delivery))
	s.handle(DeliveryReleasePath, "POST ?authority= &type= (both optional): release held removals, breaker holds and waves; clients are sent them (JSON)", releasePage(src.Delivery, src.Config))
}
