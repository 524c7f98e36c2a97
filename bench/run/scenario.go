package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/loadgen"
)

// Bounds on each phase of a scenario: generous, so a slow machine still
// finishes, and finite, so a broken one does not hang the harness. The
// sync, push and storm bounds (and the load generator's stopGrace) are for
// up to timeoutClients clients and grow in proportion above that.
const (
	startTimeout   = 20 * time.Second
	syncTimeout    = 90 * time.Second
	pushTimeout    = 30 * time.Second
	stormTimeout   = 90 * time.Second
	timeoutClients = 10000
	settle         = 500 * time.Millisecond // after a phase, for ACKs and RSS to land
	pushGap        = 200 * time.Millisecond // between two updates
)

// scaled is the bound d, set for timeoutClients, for n clients.
func scaled(d time.Duration, n int) time.Duration {
	if n <= timeoutClients {
		return d
	}
	return time.Duration(float64(d) * float64(n) / timeoutClients)
}

// connsFor is the number of gRPC connections n clients share: one per 100
// clients (C = 100 for N = 10000, 500 for N = 50000), at least 1.
func connsFor(n int) int { return max(1, n/100) }

// Scenario is one (mode, variant, workload, N) run and everything it
// measured.
type Scenario struct {
	Mode     string `json:"mode"` // direct | relayed | bare (modeDirect…)
	Variant  string `json:"variant"`
	Workload string `json:"workload"` // one | all | envoy: what each client wants, what each update changes
	Names    string `json:"names"`    // xdstp | plain
	Clients  int    `json:"clients"`
	Conns    int    `json:"conns"` // gRPC connections the clients share
	// Resources is R, what the origin holds; Window what each client
	// subscribes to (R but for workload envoy); Updates how many updates
	// were pushed, each changing ChangedPerUpdate of the R.
	Resources        int    `json:"resources"`
	Window           int    `json:"window"`
	Updates          int    `json:"updates"`
	ChangedPerUpdate int    `json:"changed_per_update"`
	Error            string `json:"error,omitempty"`

	// Initial sync: a fresh serving process (the relay holds nothing), all
	// N clients connecting at once; InitialSyncS until every one holds its
	// subscription. Then what each client received before the first update
	// (responses: 1.00 is the whole subscription in one response).
	InitialSyncS              float64 `json:"initial_sync_s"`
	InitialResponsesPerClient float64 `json:"initial_responses_per_client"`
	InitialMaxResponses       int64   `json:"initial_max_responses"`
	// GatherExpired: the relay's gather windows that expired over the
	// initial sync (xds_relay_downstream_gather_expired_total; a client
	// then waited the whole window); -1 when not read (direct, or error).
	GatherExpired             float64 `json:"gather_expired"`
	InitialResourcesPerClient float64 `json:"initial_resources_per_client"`
	InitialBytesPerClient     float64 `json:"initial_bytes_per_client"`
	// SyncCPU is what each process used from just before the load
	// generator started until every client synced; SyncProfileTop the top
	// of the relay's CPU profile over it (relayed, --profile-sync).
	SyncCPU        PhaseCPU `json:"sync_cpu_s"`
	SyncProfileTop string   `json:"sync_profile_top,omitempty"`
	// At the origin, idle after every client synced.
	OriginStreams       int `json:"origin_streams"`
	OriginSubscriptions int `json:"origin_subscriptions"`
	// Per update, at the origin.
	OriginBytesPerUpdate     float64 `json:"origin_bytes_per_update"`
	OriginResponsesPerUpdate float64 `json:"origin_responses_per_update"`
	OriginCPUSPerUpdate      float64 `json:"origin_cpu_s_per_update"`
	// What each client received per update, over the update phase:
	// responses (1: the whole change in one response), resources (just
	// what changed: ChangedPerUpdate) and bytes (proto.Size of the
	// responses).
	ClientResponsesPerUpdate float64 `json:"client_responses_per_update"`
	ClientResourcesPerUpdate float64 `json:"client_resources_per_update"`
	ClientBytesPerUpdate     float64 `json:"client_bytes_per_update"`
	// Envoy holds what the updates did to affected and unaffected clients
	// (workload envoy).
	Envoy *EnvoyFigures `json:"envoy,omitempty"`
	// Ledger: the relay's propagation ledger over the update phase's
	// changes (relayed, with the ledger on; ledger.go).
	Ledger *LedgerFigures `json:"ledger,omitempty"`
	// Fan-out: origin push → receipt by each client, one sample per client
	// and changed resource of each update.
	FanoutSamples int     `json:"fanout_samples"`
	FanoutSource  string  `json:"fanout_source"`
	FanoutP50MS   float64 `json:"fanout_p50_ms"`
	FanoutP99MS   float64 `json:"fanout_p99_ms"`
	FanoutMaxMS   float64 `json:"fanout_max_ms"`
	// The serving process: the origin (direct) or the relay (relayed).
	ServingCPUSPerUpdate float64 `json:"serving_cpu_s_per_update"`
	ServingRSSBeforeKiB  float64 `json:"serving_rss_before_kib"`
	ServingRSSAfterKiB   float64 `json:"serving_rss_after_kib"`
	RSSPerStreamKiB      float64 `json:"rss_per_stream_kib"`
	// Its Go runtime at the same two moments, and where the RSS per
	// stream goes: heap in use, goroutine stacks in use, the rest (RSS −
	// heap − stacks: heap pages freed but not yet returned to the OS, the
	// runtime's own structures, non-Go memory), and goroutines, each
	// (after − before) / N.
	ServingRuntimeBefore RuntimeMemory `json:"serving_runtime_before"`
	ServingRuntimeAfter  RuntimeMemory `json:"serving_runtime_after"`
	HeapPerStreamKiB     float64       `json:"heap_per_stream_kib"`
	StacksPerStreamKiB   float64       `json:"stacks_per_stream_kib"`
	RestPerStreamKiB     float64       `json:"rest_per_stream_kib"`
	GoroutinesPerStream  float64       `json:"goroutines_per_stream"`
	// The load generator shares the machine: its CPU per update says how
	// much of the 2 cores the serving process did not have.
	LoadgenCPUSPerUpdate float64 `json:"loadgen_cpu_s_per_update"`
	// OtherCores is the CPU that processes outside the scenario (other
	// work on a shared machine) used during the update phase, in cores:
	// what the scenario's processes did not get of the machine.
	OtherCores float64 `json:"other_cores"`
	// RelayProfileTop is `go tool pprof -top` of the relay's CPU profile
	// over the update phase (relayed mode, when profiling is on).
	RelayProfileTop string `json:"relay_profile_top,omitempty"`
	// RelayHeapTop is the top of the relay's in-use heap at idle (relayed
	// mode, when profiling is on).
	RelayHeapTop string `json:"relay_heap_top,omitempty"`
	// Reconnect storm.
	StormS              float64 `json:"storm_s"`
	StormCompleted      bool    `json:"storm_completed"`
	StormOriginRequests int64   `json:"storm_origin_requests"`
	// StormCPU and StormProfileTop are SyncCPU and SyncProfileTop for the
	// storm, from the reconnect until every client synced again.
	StormCPU        PhaseCPU `json:"storm_cpu_s"`
	StormProfileTop string   `json:"storm_profile_top,omitempty"`
	// StormPeakRSSKiB is the serving process's largest RSS from just
	// before the reconnect until every client synced again (VmHWM, reset
	// before it); 0 when it could not be read. Against
	// ServingRSSAfterKiB, the steady state after the first sync.
	StormPeakRSSKiB float64 `json:"storm_peak_rss_kib"`

	LoadgenStreamErrors int64  `json:"loadgen_stream_errors"`
	LoadgenLastError    string `json:"loadgen_last_error,omitempty"`
}

// PhaseCPU is the CPU seconds (utime+stime) each process used over a
// phase: the serving process (the origin itself, direct), the origin and
// the load generator. Against the phase's length it says which was the
// bound: one near 2 cores' worth, or none (waiting).
type PhaseCPU struct {
	Serving float64 `json:"serving"`
	Origin  float64 `json:"origin"`
	Loadgen float64 `json:"loadgen"`
}

// EnvoyFigures is what the updates of workload envoy did, per affected
// client (its window holds a changed name) and update, and to the
// unaffected clients.
type EnvoyFigures struct {
	Tally loadgen.UpdateTally `json:"tally"`
	// AffectedPerUpdate is the mean number of affected clients per update.
	AffectedPerUpdate float64 `json:"affected_per_update"`
	// Per affected client and update: responses (1.00: one per origin
	// change), resources (ChangedInWindow when only what changed is sent,
	// each once), changed names in its window, bytes (proto.Size).
	ResponsesPerAffected       float64 `json:"responses_per_affected"`
	ResourcesPerAffected       float64 `json:"resources_per_affected"`
	ChangedInWindowPerAffected float64 `json:"changed_in_window_per_affected"`
	BytesPerAffected           float64 `json:"bytes_per_affected"`
	// ExactFraction is the fraction of affected client-updates with one
	// response holding exactly the changed names of the window.
	ExactFraction float64 `json:"exact_fraction"`
	// UnaffectedResponses is what all unaffected clients received over all
	// updates: 0 when nobody hears of a change to what it does not hold.
	UnaffectedResponses int64 `json:"unaffected_responses"`
}

func envoyFigures(t loadgen.UpdateTally) *EnvoyFigures {
	e := &EnvoyFigures{Tally: t, UnaffectedResponses: t.UnaffectedResponses}
	if t.Updates > 0 {
		e.AffectedPerUpdate = float64(t.Affected) / float64(t.Updates)
	}
	if a := float64(t.Affected); a > 0 {
		e.ResponsesPerAffected = float64(t.AffectedResponses) / a
		e.ResourcesPerAffected = float64(t.AffectedResources) / a
		e.ChangedInWindowPerAffected = float64(t.ChangedInWindows) / a
		e.BytesPerAffected = float64(t.AffectedBytes) / a
		e.ExactFraction = float64(t.Exact) / a
	}
	return e
}

// originStats mirrors bench/origin's GET /stats.
type originStats struct {
	StreamsOpen   int   `json:"streams_open"`
	Subscriptions int   `json:"subscriptions"`
	Requests      int64 `json:"requests"`
	Responses     int64 `json:"responses"`
	BytesSent     int64 `json:"bytes_sent"`
}

// env is what every scenario shares.
type env struct {
	relayBin, originBin string
	logDir              string
	resources, updates  int // R of workloads one and all; updates per scenario
	envoy               envoyShape
	resourceSize        int
	authority           string
	goBin               string
	profileDir          string        // "" : no relay CPU profiles
	profileUpdates      bool          // profile the relay over the update phase, heap at idle (--profile)
	profilePhases       bool          // profile the relay over the sync and the storm (--profile-sync)
	pin                 Pinning       // zero: no process pinned
	maxRun              time.Duration // loadgen --duration: a backstop only
	ledgerOff           bool          // the relay runs with propagation.enabled false (--propagation=false)
	deliveryOff         bool          // the relay runs with safe delivery off (--delivery=false)
}

// runScenario runs one scenario; failures are recorded in the result, so
// the other scenarios still run.
func (e *env) runScenario(ctx context.Context, mode, variant, workload, names string, n int) Scenario {
	sc := Scenario{Mode: mode, Variant: variant, Workload: workload, Names: names, Clients: n, Conns: connsFor(n),
		Resources: e.resources, Window: e.resources, Updates: e.updates}
	if workload == workloadEnvoy {
		sc.Resources, sc.Window = e.envoy.Resources, e.envoy.Window
	}
	sc.ChangedPerUpdate = changedPerUpdate(workload, sc.Resources, e.envoy)
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			_ = children[i].stop() // shutting down: an exit status here says nothing about the figures
		}
	}()
	if err := e.scenario(ctx, &sc, &children); err != nil {
		sc.Error = err.Error()
	}
	return sc
}

// scenario runs sc's phases in order: start the serving processes and
// the clients, wait for sync, idle memory, updates, reconnect storm, stop.
// Every process it starts goes into children.
func (e *env) scenario(ctx context.Context, sc *Scenario, children *[]*child) error {
	r, err := e.newScenarioRun(sc, children)
	if err != nil {
		return err
	}
	if err := r.startServing(ctx); err != nil {
		return err
	}
	if err := r.writeNames(); err != nil {
		return err
	}
	time.Sleep(settle) // let the serving process reach its idle footprint
	if sc.ServingRSSBeforeKiB, sc.ServingRuntimeBefore, err = r.servingMemory(); err != nil {
		return fmt.Errorf("before the clients: %w", err)
	}
	if err := r.syncPhase(ctx); err != nil {
		return err
	}
	counts, idle, err := r.measureIdle()
	if err != nil {
		return err
	}
	wantSamples, after, err := r.updatePhase(ctx, counts, idle)
	if err != nil {
		return err
	}
	if err := r.storm(ctx, after); err != nil {
		return err
	}
	return r.fanout(wantSamples)
}

// scenarioRun is one scenario while it runs: its processes, their
// addresses and what the phases hand on to the next.
type scenarioRun struct {
	e        *env
	sc       *Scenario // the figures, filled in phase by phase
	children *[]*child // every process started, stopped by runScenario
	tag      string    // names the scenario's logs and files

	originXDS, originAdmin, relayXDS, relayAdmin, lgAdmin string

	origin, serving, lg *child // serving is origin (direct) or the relay
	target              string // where the clients connect: serving's xDS address
	servingAdmin        string // serving's admin address (its /metrics)

	namesFile string         // the origin's names, one per line, for the load generator
	subs      loadgen.Config // the clients' subscriptions, as the load generator cuts them
	window    []string       // the load generator's window flags (workload envoy)

	last loadgen.Status // the load generator's status as last read by a wait

	// sendTimeout is the relay's downstream.send_timeout (0: 60 s);
	// loadgenArgs are more flags for the load generator (the fairness
	// scenarios').
	sendTimeout time.Duration
	loadgenArgs []string
}

// newScenarioRun names the scenario and picks its five ports.
func (e *env) newScenarioRun(sc *Scenario, children *[]*child) (*scenarioRun, error) {
	tag := fmt.Sprintf("%s-%s-%s-%d", sc.Mode, sc.Variant, sc.Workload, sc.Clients)
	if sc.Workload == workloadEnvoy {
		tag = fmt.Sprintf("%s-%s-%s-%s-%d", sc.Mode, sc.Variant, sc.Workload, sc.Names, sc.Clients)
	}
	if e.pin != (Pinning{}) {
		tag += "-pinned" // its profiles beside, not over, an unpinned run's
	}
	ports := make([]string, 5)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ports[i] = p
	}
	return &scenarioRun{e: e, sc: sc, children: children, tag: tag,
		originXDS: ports[0], originAdmin: ports[1], relayXDS: ports[2], relayAdmin: ports[3], lgAdmin: ports[4]}, nil
}

// startServing starts the origin and, relayed, the relay in front of it,
// and waits for each to listen.
func (r *scenarioRun) startServing(ctx context.Context) error {
	e, sc := r.e, r.sc
	origin, err := start(e.logDir, r.tag+"-origin", e.pin.Origin, e.originBin,
		"--listen", r.originXDS, "--admin", r.originAdmin,
		"--resources", strconv.Itoa(sc.Resources), "--size", strconv.Itoa(e.resourceSize),
		"--authority", e.authority, "--names", sc.Names)
	if err != nil {
		return err
	}
	*r.children = append(*r.children, origin)
	if err := waitListening(ctx, origin, r.originAdmin, startTimeout); err != nil {
		return err
	}
	r.origin, r.serving, r.target, r.servingAdmin = origin, origin, r.originXDS, r.originAdmin
	if !relayedMode(sc.Mode) {
		return nil
	}
	off := e.featuresOff(sc.Mode)
	cfgPath := filepath.Join(e.logDir, r.tag+"-relay.yaml")
	if err := os.WriteFile(cfgPath, []byte(relayConfig(r.relayXDS, r.relayAdmin, e.authority, r.originXDS, sc.Clients, cmp.Or(r.sendTimeout, 60*time.Second), off)), 0o644); err != nil {
		return fmt.Errorf("relay config: %w", err)
	}
	relay, err := start(e.logDir, r.tag+"-relay", e.pin.Relay, e.relayBin, "serve", "--config", cfgPath)
	if err != nil {
		return err
	}
	*r.children = append(*r.children, relay)
	if err := waitListening(ctx, relay, r.relayXDS, startTimeout); err != nil {
		return err
	}
	r.serving, r.target, r.servingAdmin = relay, r.relayXDS, r.relayAdmin
	return nil
}

// writeNames writes the origin's names for the load generator and cuts
// the clients' subscriptions as it will.
func (r *scenarioRun) writeNames() error {
	sc := r.sc
	names := make([]string, sc.Resources)
	for i := range names {
		names[i] = resourceName(sc.Names, r.e.authority, i)
	}
	r.namesFile = filepath.Join(r.e.logDir, r.tag+"-names.txt")
	if err := os.WriteFile(r.namesFile, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("names file: %w", err)
	}
	r.subs = loadgen.Config{Clients: sc.Clients, Names: names}
	r.window = []string{}
	if sc.Workload == workloadEnvoy {
		r.subs.Window = sc.Window
		r.window = []string{"--window", strconv.Itoa(sc.Window), "--node-clusters", strconv.Itoa(r.e.envoy.NodeClusters)}
	}
	return nil
}

// startLoadgen starts the load generator's clients against the serving
// process and waits for its control endpoint.
func (r *scenarioRun) startLoadgen(ctx context.Context) error {
	sc := r.sc
	lgArgs := append([]string{"loadgen",
		"--target", r.target, "--clients", strconv.Itoa(sc.Clients), "--conns", strconv.Itoa(sc.Conns),
		"--variant", sc.Variant, "--names-file", r.namesFile, "--admin", r.lgAdmin, "--json", "--quiet",
		"--duration", r.e.maxRun.String()}, append(append([]string{}, r.window...), r.loadgenArgs...)...)
	lg, err := start(r.e.logDir, r.tag+"-loadgen", r.e.pin.Loadgen, r.e.relayBin, lgArgs...)
	if err != nil {
		return err
	}
	*r.children = append(*r.children, lg)
	r.lg = lg
	return waitListening(ctx, lg, r.lgAdmin, startTimeout)
}

// stats is the origin's GET /stats.
func (r *scenarioRun) stats() (originStats, error) {
	var s originStats
	err := getJSON("http://"+r.originAdmin+"/stats", &s)
	return s, err
}

// status is the load generator's GET /status; a fatal error once the
// serving process has exited.
func (r *scenarioRun) status() (loadgen.Status, error) {
	var s loadgen.Status
	if r.serving.exited() {
		return s, fatal{fmt.Errorf("%s exited: %v; log: %s", r.serving.name, r.serving.err, r.serving.logTail())}
	}
	err := getJSON("http://"+r.lgAdmin+"/status", &s)
	return s, err
}

// clientCounts is the load generator's GET /clients, one count per client.
func (r *scenarioRun) clientCounts() (loadgen.ClientCounts, error) {
	var c loadgen.ClientCounts
	err := getJSON("http://"+r.lgAdmin+"/clients", &c)
	if err == nil && len(c.Responses) != r.sc.Clients {
		err = fmt.Errorf("counts of %d clients, want %d", len(c.Responses), r.sc.Clients)
	}
	return c, err
}

// waitStatus waits, within timeout, until cond holds of the load
// generator's status, keeping the last one read in r.last.
func (r *scenarioRun) waitStatus(ctx context.Context, timeout time.Duration, what string, cond func(loadgen.Status) bool) error {
	return waitUntil(ctx, timeout, what, func() (bool, error) {
		s, err := r.status()
		r.last = s
		return err == nil && cond(s), err
	})
}

// syncPhase starts the load generator's clients and waits until every one
// synced, recording what each process's CPU did meanwhile and, with
// --profile-sync, a CPU profile of the relay.
func (r *scenarioRun) syncPhase(ctx context.Context) error {
	cpu0, err := r.cpuTimes() // no load generator yet: its CPU counts from its start
	if err != nil {
		return err
	}
	profiled := r.phaseProfile("sync")
	if err := r.startLoadgen(ctx); err != nil {
		return err
	}
	if err := r.waitSynced(ctx); err != nil {
		return err
	}
	cpu1, err := r.cpuTimes()
	if err != nil {
		return err
	}
	r.sc.SyncCPU = cpu1.since(cpu0)
	r.sc.SyncProfileTop = profiled()
	return nil
}

// phaseProfile starts, relayed with --profile-sync, a CPU profile of the
// relay over the phase that begins (syncProfileSeconds), saved as
// TAG-PHASE-relay-cpu.prof; it returns a function that waits for it and
// returns its top ("" when none is taken). Waiting keeps the profile off
// the next phase, whose own profile could not start meanwhile.
func (r *scenarioRun) phaseProfile(phase string) func() string {
	if !relayedMode(r.sc.Mode) || !r.e.profilePhases {
		return func() string { return "" }
	}
	done := make(chan string, 1)
	go func() { done <- r.e.profileRelay(r.relayAdmin, r.tag+"-"+phase, syncProfileSeconds(r.sc.Clients)) }()
	return func() string { return <-done }
}

// waitSynced waits for the initial sync of every client.
func (r *scenarioRun) waitSynced(ctx context.Context) error {
	sc := r.sc
	err := r.waitStatus(ctx, scaled(syncTimeout, sc.Clients), "every client synced", func(s loadgen.Status) bool {
		return s.Synced == int64(sc.Clients)
	})
	if err != nil {
		return fmt.Errorf("%w (synced %d of %d, last stream error: %s)", err, r.last.Synced, sc.Clients, r.last.LastError)
	}
	sc.InitialSyncS = r.last.InitialSyncS
	return nil
}

// measureIdle records, once every client synced: streams, subscriptions,
// memory and what each client received. It returns the client counts and
// the origin's stats then, which the update phase starts from.
func (r *scenarioRun) measureIdle() (loadgen.ClientCounts, originStats, error) {
	sc := r.sc
	time.Sleep(settle)
	idle, err := r.stats()
	if err != nil {
		return loadgen.ClientCounts{}, idle, fmt.Errorf("origin stats: %w", err)
	}
	sc.OriginStreams, sc.OriginSubscriptions = idle.StreamsOpen, idle.Subscriptions
	if sc.ServingRSSAfterKiB, sc.ServingRuntimeAfter, err = r.servingMemory(); err != nil {
		return loadgen.ClientCounts{}, idle, fmt.Errorf("every client synced: %w", err)
	}
	sc.idlePerStream()
	sc.GatherExpired = -1
	if relayedMode(sc.Mode) {
		if n, err := metricSum(r.relayAdmin, "xds_relay_downstream_gather_expired_total"); err == nil {
			sc.GatherExpired = n
		}
	}
	counts, err := r.clientCounts()
	if err != nil {
		return counts, idle, fmt.Errorf("loadgen client counts: %w", err)
	}
	sc.InitialResponsesPerClient, sc.InitialMaxResponses = meanMax(counts.Responses)
	sc.InitialResourcesPerClient, _ = meanMax(counts.Resources)
	sc.InitialBytesPerClient, _ = meanMax(counts.Bytes)
	if relayedMode(sc.Mode) && r.e.profileUpdates {
		sc.RelayHeapTop = r.e.relayHeapTop(r.relayAdmin, r.tag)
	}
	return counts, idle, nil
}

// servingMemory reads the serving process's RSS and, right after, its Go
// runtime's figures.
func (r *scenarioRun) servingMemory() (float64, RuntimeMemory, error) {
	rss, err := rssKiB(r.serving.pid())
	if err != nil {
		return 0, RuntimeMemory{}, fmt.Errorf("RSS: %w", err)
	}
	rt, err := runtimeMemory(r.servingAdmin)
	if err != nil {
		return rss, rt, fmt.Errorf("%s runtime memory: %w", r.serving.name, err)
	}
	return rss, rt, nil
}

// idlePerStream divides the serving process's growth from before the
// clients connected to after they all synced by N: RSS, and of it the
// heap in use, the goroutine stacks in use and the rest; and goroutines.
func (sc *Scenario) idlePerStream() {
	n := float64(sc.Clients)
	b, a := sc.ServingRuntimeBefore, sc.ServingRuntimeAfter
	sc.RSSPerStreamKiB = (sc.ServingRSSAfterKiB - sc.ServingRSSBeforeKiB) / n
	sc.HeapPerStreamKiB = (a.HeapInuseBytes - b.HeapInuseBytes) / 1024 / n
	sc.StacksPerStreamKiB = (a.StackInuseBytes - b.StackInuseBytes) / 1024 / n
	sc.RestPerStreamKiB = sc.RSSPerStreamKiB - sc.HeapPerStreamKiB - sc.StacksPerStreamKiB
	sc.GoroutinesPerStream = (a.Goroutines - b.Goroutines) / n
}

// cpuTimes is the CPU seconds the scenario's processes have used.
type cpuTimes struct{ serving, origin, lg float64 }

// since is what each process used from t0 to t.
func (t cpuTimes) since(t0 cpuTimes) PhaseCPU {
	return PhaseCPU{Serving: t.serving - t0.serving, Origin: t.origin - t0.origin, Loadgen: t.lg - t0.lg}
}

// cpuTimes reads the processes' CPU seconds; the load generator's is 0
// before it starts.
func (r *scenarioRun) cpuTimes() (cpuTimes, error) {
	var t cpuTimes
	var err error
	if t.serving, err = cpuSeconds(r.serving.pid()); err != nil {
		return t, err
	}
	if t.origin, err = cpuSeconds(r.origin.pid()); err != nil || r.lg == nil {
		return t, err
	}
	t.lg, err = cpuSeconds(r.lg.pid())
	return t, err
}

// updatePhase pushes the updates, each changing one resource or all of
// them (the workload) and reaching every client, which takes a fan-out
// sample per changed resource, and records what they cost. It returns the
// fan-out samples expected and the origin's stats after the phase.
func (r *scenarioRun) updatePhase(ctx context.Context, counts loadgen.ClientCounts, idle originStats) (int64, originStats, error) {
	e, sc := r.e, r.sc
	cpu0, err := r.cpuTimes()
	if err != nil {
		return 0, originStats{}, err
	}
	before, err := r.status()
	if err != nil {
		return 0, originStats{}, err
	}
	busy0, err := machineBusySeconds()
	if err != nil {
		return 0, originStats{}, err
	}
	wall0 := time.Now()
	profDone := make(chan string, 1)
	if relayedMode(sc.Mode) && e.profileUpdates {
		go func() {
			profDone <- e.profileRelay(r.relayAdmin, r.tag, profileSeconds(e.updates, sc.Clients, changedPerClient(sc)))
		}()
	} else {
		profDone <- ""
	}
	wantSamples, err := r.pushUpdates(ctx, before, counts)
	if err != nil {
		return 0, originStats{}, err
	}
	cpu1, err := r.cpuTimes()
	if err != nil {
		return 0, originStats{}, err
	}
	busy1, err := machineBusySeconds()
	if err != nil {
		return 0, originStats{}, err
	}
	ours := (cpu1.lg - cpu0.lg) + (cpu1.origin - cpu0.origin)
	if r.serving != r.origin {
		ours += cpu1.serving - cpu0.serving
	}
	sc.OtherCores = max(0, (busy1-busy0-ours)/time.Since(wall0).Seconds())
	sc.RelayProfileTop = <-profDone
	if sc.Mode == "relayed" && !e.ledgerOff {
		if sc.Ledger, err = readLedger(r.relayAdmin, wall0, time.Now()); err != nil {
			return 0, originStats{}, err
		}
	}
	after, err := r.recordUpdates(before, idle, cpu0, cpu1)
	return wantSamples, after, err
}

// pushUpdates pushes e.updates updates, waiting after each until every
// client received it, and returns the fan-out samples that makes: one per
// client and changed resource its subscription holds. For workload envoy
// it records, client by client, what each update did.
func (r *scenarioRun) pushUpdates(ctx context.Context, before loadgen.Status, counts loadgen.ClientCounts) (int64, error) {
	e, sc := r.e, r.sc
	var wantSamples int64
	var tally loadgen.UpdateTally
	for k := 1; k <= e.updates; k++ {
		var pushed struct {
			Names []string `json:"names"`
		}
		if err := postJSON(pushURL(r.originAdmin, sc.Workload, e.envoy), &pushed); err != nil {
			return 0, fmt.Errorf("push %d: %w", k, err)
		}
		if sc.Workload == workloadEnvoy {
			for _, c := range r.subs.ChangedIn(pushed.Names) {
				wantSamples += int64(c)
			}
		} else {
			wantSamples += int64(sc.ChangedPerUpdate * sc.Clients)
		}
		want := before.Stamped + wantSamples
		err := r.waitStatus(ctx, scaled(pushTimeout, sc.Clients), fmt.Sprintf("update %d at every client", k), func(s loadgen.Status) bool {
			return s.Stamped >= want
		})
		if err != nil {
			return 0, fmt.Errorf("%w (%d of %d receipts)", err, r.last.Stamped-before.Stamped, wantSamples)
		}
		time.Sleep(pushGap)
		if sc.Workload == workloadEnvoy {
			// What this update did, client by client: what arrived since
			// the previous one had reached everyone.
			next, err := r.clientCounts()
			if err != nil {
				return 0, fmt.Errorf("loadgen client counts: %w", err)
			}
			t, err := r.subs.TallyUpdate(pushed.Names, counts, next)
			if err != nil {
				return 0, err
			}
			tally.Add(t)
			counts = next
		}
	}
	time.Sleep(settle)
	if sc.Workload == workloadEnvoy {
		sc.Envoy = envoyFigures(tally)
	}
	return wantSamples, nil
}

// recordUpdates records the update phase's figures per update, from the
// status before it, the origin's stats at idle and the CPU times around
// it; it returns the origin's stats after it.
func (r *scenarioRun) recordUpdates(before loadgen.Status, idle originStats, cpu0, cpu1 cpuTimes) (originStats, error) {
	e, sc := r.e, r.sc
	if s, err := r.status(); err == nil {
		per := float64(e.updates * sc.Clients)
		sc.ClientResponsesPerUpdate = float64(s.Responses-before.Responses) / per
		sc.ClientResourcesPerUpdate = float64(s.Received-before.Received) / per
		sc.ClientBytesPerUpdate = float64(s.BytesReceived-before.BytesReceived) / per
	}
	after, err := r.stats()
	if err != nil {
		return after, err
	}
	u := float64(e.updates)
	sc.ServingCPUSPerUpdate = (cpu1.serving - cpu0.serving) / u
	sc.OriginCPUSPerUpdate = (cpu1.origin - cpu0.origin) / u
	sc.LoadgenCPUSPerUpdate = (cpu1.lg - cpu0.lg) / u
	sc.OriginBytesPerUpdate = float64(after.BytesSent-idle.BytesSent) / u
	sc.OriginResponsesPerUpdate = float64(after.Responses-idle.Responses) / u
	return after, nil
}

// storm has every client drop its stream and connection at once and
// records how long they took to sync again and what the origin saw of it,
// against its stats after the updates.
func (r *scenarioRun) storm(ctx context.Context, after originStats) error {
	sc := r.sc
	cpu0, err := r.cpuTimes()
	if err != nil {
		return err
	}
	profiled := r.phaseProfile("storm")
	peak := resetPeakRSS(r.serving.pid()) == nil // else not measured (an older kernel)
	if err := post("http://" + r.lgAdmin + "/reconnect"); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	err = r.waitStatus(ctx, scaled(stormTimeout, sc.Clients), "every client synced after the reconnect storm", func(s loadgen.Status) bool {
		return len(s.Storms) > 0
	})
	if err != nil {
		return fmt.Errorf("%w (synced %d of %d, last stream error: %s)", err, r.last.Synced, sc.Clients, r.last.LastError)
	}
	cpu1, err := r.cpuTimes()
	if err != nil {
		return err
	}
	sc.StormCPU = cpu1.since(cpu0)
	if peak {
		sc.StormPeakRSSKiB, _ = peakRSSKiB(r.serving.pid())
	}
	sc.StormProfileTop = profiled()
	sc.StormS, sc.StormCompleted = r.last.Storms[0].DurationS, r.last.Storms[0].Completed
	time.Sleep(settle)
	stormed, err := r.stats()
	if err != nil {
		return err
	}
	sc.StormOriginRequests = stormed.Requests - after.Requests
	return nil
}

// fanout stops the load generator and records its summary: the fan-out
// latency distribution, which must hold wantSamples samples. Closing N
// streams and sorting every sample takes longer as N grows.
func (r *scenarioRun) fanout(wantSamples int64) error {
	sc, lg := r.sc, r.lg
	if err := lg.stopWithin(scaled(stopGrace, sc.Clients)); err != nil {
		return fmt.Errorf("loadgen: %w; log: %s", err, lg.logTail())
	}
	var sum loadgen.Summary
	if err := json.Unmarshal(lg.stdout.Bytes(), &sum); err != nil {
		return fmt.Errorf("loadgen summary: %w", err)
	}
	sc.FanoutSamples, sc.FanoutSource = sum.Samples, sum.LatencySource
	sc.FanoutP50MS, sc.FanoutP99MS, sc.FanoutMaxMS = sum.P50MS, sum.P99MS, sum.MaxMS
	sc.LoadgenStreamErrors, sc.LoadgenLastError = sum.StreamErrors, sum.LastError
	if int64(sc.FanoutSamples) != wantSamples {
		return fmt.Errorf("%d fan-out samples, want one per client and changed resource it subscribes to = %d", sc.FanoutSamples, wantSamples)
	}
	return nil
}

// resourceName matches bench/origin's names.
func resourceName(scheme, authority string, i int) string {
	if scheme == namesPlain {
		return fmt.Sprintf("cla-%04d", i)
	}
	return fmt.Sprintf("xdstp://%s/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-%04d", authority, i)
}

// changedPerClient is about how many resources each update changes of
// what one client subscribes to, at least 1.
func changedPerClient(sc *Scenario) int {
	if sc.Resources == 0 {
		return 1
	}
	return max(1, (sc.ChangedPerUpdate*sc.Window+sc.Resources-1)/sc.Resources)
}

// meanMax returns the mean and the largest of vs (0, 0 for none).
func meanMax(vs []int64) (float64, int64) {
	if len(vs) == 0 {
		return 0, 0
	}
	var sum, top int64
	for _, v := range vs {
		sum += v
		top = max(top, v)
	}
	return float64(sum) / float64(len(vs)), top
}

// relayConfig is the relay's config for one scenario: one authority whose
// origin is the benchmark origin, spoken to in delta. Being the only
// authority, it also serves plain names (plain_names defaults to true), in
// one upstream stream per node cluster: the load generator's clients share
// one (or --node-clusters). No drain delay at shutdown: nothing balances
// load onto this relay, and a scenario's end would wait it out. Room for
// twice the fleet's streams: in the reconnect storm every client opens a
// new stream while the relay may still hold its old one, and at N = 100000
// the default max_streams (100000) refused 176568 reconnects. sendTimeout
// is downstream.send_timeout (60 s; the fairness scenarios' own). off: the
// features turned off to measure their cost (--propagation=false:
// propagation.enabled false; --delivery=false: safe delivery off, its
// validation, NACK breaker and deletion guard; otherwise their defaults).
func relayConfig(listen, admin, authority, origin string, clients int, sendTimeout time.Duration, off featuresOff) string {
	validate, breaker, share := true, config.DefaultNackBreakerClients, config.DefaultMaxRemovedShare
	if off.delivery {
		validate, breaker, share = false, 0, 1
	}
	return fmt.Sprintf(`listen: %q
admin: %q
admin_pprof: true
authorities:
  - name: %q
    origins: [%q]
    transport: delta
log:
  level: warn
downstream:
  send_timeout: %s
  drain_delay: 0s
  limits:
    max_streams: %d
propagation:
  enabled: %t
delivery:
  validate: %t
  nack_breaker:
    clients: %d
  deletion_guard:
    max_removed_share: %g
`, listen, admin, authority, origin, sendTimeout, max(config.DefaultMaxStreams, 2*clients), !off.ledger, validate, breaker, share)
}

// featuresOff are the relay features a run turns off to measure what they
// cost (--propagation=false, --delivery=false, or mode bare).
type featuresOff struct{ ledger, delivery bool }

// The modes: clients of the origin (direct), of a relay at its defaults
// (relayed), or of a relay with the propagation ledger and safe delivery
// off (bare): --modes direct,relayed,bare measures what those defaults
// cost in the same run, each workload's three rows side by side.
const (
	modeDirect  = "direct"
	modeRelayed = "relayed"
	modeBare    = "bare"
)

// featuresOff returns what the relay of a scenario of mode runs without:
// everything measured in mode bare, else what --propagation and
// --delivery say.
func (e *env) featuresOff(mode string) featuresOff {
	if mode == modeBare {
		return featuresOff{ledger: true, delivery: true}
	}
	return featuresOff{ledger: e.ledgerOff, delivery: e.deliveryOff}
}

// relayedMode reports whether clients of mode talk to a relay.
func relayedMode(mode string) bool { return mode == modeRelayed || mode == modeBare }
