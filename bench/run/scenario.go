package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	Mode     string `json:"mode"` // direct | relayed
	Variant  string `json:"variant"`
	Workload string `json:"workload"` // one | all: what each update changes
	Clients  int    `json:"clients"`
	Conns    int    `json:"conns"` // gRPC connections the clients share
	// Resources is R, what every client subscribes to; Updates how many
	// updates were pushed, each changing ChangedPerUpdate of the R.
	Resources        int    `json:"resources"`
	Updates          int    `json:"updates"`
	ChangedPerUpdate int    `json:"changed_per_update"`
	Error            string `json:"error,omitempty"`

	InitialSyncS float64 `json:"initial_sync_s"`
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
	// RelayGoroutinesPerStream is the relay's goroutine count at idle per
	// client stream; RelayHeapTop the top of its in-use heap then.
	RelayGoroutinesPerStream float64 `json:"relay_goroutines_per_stream,omitempty"`
	RelayHeapTop             string  `json:"relay_heap_top,omitempty"`
	// Reconnect storm.
	StormS              float64 `json:"storm_s"`
	StormCompleted      bool    `json:"storm_completed"`
	StormOriginRequests int64   `json:"storm_origin_requests"`

	LoadgenStreamErrors int64  `json:"loadgen_stream_errors"`
	LoadgenLastError    string `json:"loadgen_last_error,omitempty"`
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
	resources, updates  int
	resourceSize        int
	authority           string
	goBin               string
	profileDir          string        // "" : no relay CPU profiles
	maxRun              time.Duration // loadgen --duration: a backstop only
}

// runScenario runs one scenario; failures are recorded in the result, so
// the other scenarios still run.
func (e *env) runScenario(ctx context.Context, mode, variant, workload string, n int) Scenario {
	sc := Scenario{Mode: mode, Variant: variant, Workload: workload, Clients: n, Conns: connsFor(n),
		Resources: e.resources, Updates: e.updates, ChangedPerUpdate: changedPerUpdate(workload, e.resources)}
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

func (e *env) scenario(ctx context.Context, sc *Scenario, children *[]*child) error {
	tag := fmt.Sprintf("%s-%s-%s-%d", sc.Mode, sc.Variant, sc.Workload, sc.Clients)
	ports := make([]string, 5)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return fmt.Errorf("free port: %w", err)
		}
		ports[i] = p
	}
	originXDS, originAdmin, relayXDS, relayAdmin, lgAdmin := ports[0], ports[1], ports[2], ports[3], ports[4]

	origin, err := start(e.logDir, tag+"-origin", e.originBin,
		"--listen", originXDS, "--admin", originAdmin,
		"--resources", strconv.Itoa(e.resources), "--size", strconv.Itoa(e.resourceSize),
		"--authority", e.authority)
	if err != nil {
		return err
	}
	*children = append(*children, origin)
	if err := waitListening(ctx, origin, originAdmin, startTimeout); err != nil {
		return err
	}
	stats := func() (originStats, error) {
		var s originStats
		err := getJSON("http://"+originAdmin+"/stats", &s)
		return s, err
	}

	serving, target := origin, originXDS
	if sc.Mode == "relayed" {
		cfgPath := filepath.Join(e.logDir, tag+"-relay.yaml")
		if err := os.WriteFile(cfgPath, []byte(relayConfig(relayXDS, relayAdmin, e.authority, originXDS)), 0o644); err != nil {
			return fmt.Errorf("relay config: %w", err)
		}
		relay, err := start(e.logDir, tag+"-relay", e.relayBin, "serve", "--config", cfgPath)
		if err != nil {
			return err
		}
		*children = append(*children, relay)
		if err := waitListening(ctx, relay, relayXDS, startTimeout); err != nil {
			return err
		}
		serving, target = relay, relayXDS
	}

	names := make([]string, e.resources)
	for i := range names {
		names[i] = resourceName(e.authority, i)
	}
	time.Sleep(settle) // let the serving process reach its idle footprint
	if sc.ServingRSSBeforeKiB, err = rssKiB(serving.pid()); err != nil {
		return fmt.Errorf("RSS before: %w", err)
	}

	lg, err := start(e.logDir, tag+"-loadgen", e.relayBin, "loadgen",
		"--target", target, "--clients", strconv.Itoa(sc.Clients), "--conns", strconv.Itoa(sc.Conns),
		"--variant", sc.Variant, "--names", strings.Join(names, ","), "--admin", lgAdmin, "--json", "--quiet",
		"--duration", e.maxRun.String())
	if err != nil {
		return err
	}
	*children = append(*children, lg)
	if err := waitListening(ctx, lg, lgAdmin, startTimeout); err != nil {
		return err
	}
	status := func() (loadgen.Status, error) {
		var s loadgen.Status
		if serving.exited() {
			return s, fatal{fmt.Errorf("%s exited: %v; log: %s", serving.name, serving.err, serving.logTail())}
		}
		err := getJSON("http://"+lgAdmin+"/status", &s)
		return s, err
	}
	var last loadgen.Status
	err = waitUntil(ctx, scaled(syncTimeout, sc.Clients), "every client synced", func() (bool, error) {
		s, err := status()
		last = s
		return err == nil && s.Synced == int64(sc.Clients), err
	})
	if err != nil {
		return fmt.Errorf("%w (synced %d of %d, last stream error: %s)", err, last.Synced, sc.Clients, last.LastError)
	}
	sc.InitialSyncS = last.InitialSyncS

	// Idle: streams, subscriptions, memory.
	time.Sleep(settle)
	idle, err := stats()
	if err != nil {
		return fmt.Errorf("origin stats: %w", err)
	}
	sc.OriginStreams, sc.OriginSubscriptions = idle.StreamsOpen, idle.Subscriptions
	if sc.ServingRSSAfterKiB, err = rssKiB(serving.pid()); err != nil {
		return fmt.Errorf("RSS after: %w", err)
	}
	sc.RSSPerStreamKiB = (sc.ServingRSSAfterKiB - sc.ServingRSSBeforeKiB) / float64(sc.Clients)
	if sc.Mode == "relayed" {
		g, top := e.idleRelay(relayAdmin, tag)
		sc.RelayGoroutinesPerStream, sc.RelayHeapTop = float64(g)/float64(sc.Clients), top
	}

	// Updates: each changes one resource or all of them (the workload) and
	// reaches every client, which takes a fan-out sample per changed
	// resource.
	cpu0, err := cpuSeconds(serving.pid())
	if err != nil {
		return err
	}
	ocpu0, err := cpuSeconds(origin.pid())
	if err != nil {
		return err
	}
	lcpu0, err := cpuSeconds(lg.pid())
	if err != nil {
		return err
	}
	before, err := status()
	if err != nil {
		return err
	}
	busy0, err := machineBusySeconds()
	if err != nil {
		return err
	}
	wall0 := time.Now()
	profDone := make(chan string, 1)
	if sc.Mode == "relayed" && e.profileDir != "" {
		go func() {
			profDone <- e.profileRelay(relayAdmin, tag, profileSeconds(e.updates, sc.Clients, sc.ChangedPerUpdate))
		}()
	} else {
		profDone <- ""
	}
	perUpdate := sc.ChangedPerUpdate * sc.Clients // fan-out samples
	for k := 1; k <= e.updates; k++ {
		if err := post(pushURL(originAdmin, sc.Workload)); err != nil {
			return fmt.Errorf("push %d: %w", k, err)
		}
		want := before.Stamped + int64(k*perUpdate)
		err := waitUntil(ctx, scaled(pushTimeout, sc.Clients), fmt.Sprintf("update %d at every client", k), func() (bool, error) {
			s, err := status()
			last = s
			return err == nil && s.Stamped >= want, err
		})
		if err != nil {
			return fmt.Errorf("%w (%d of %d receipts)", err, last.Stamped-before.Stamped, k*perUpdate)
		}
		time.Sleep(pushGap)
	}
	time.Sleep(settle)
	cpu1, err := cpuSeconds(serving.pid())
	if err != nil {
		return err
	}
	ocpu1, err := cpuSeconds(origin.pid())
	if err != nil {
		return err
	}
	lcpu1, err := cpuSeconds(lg.pid())
	if err != nil {
		return err
	}
	busy1, err := machineBusySeconds()
	if err != nil {
		return err
	}
	ours := (lcpu1 - lcpu0) + (ocpu1 - ocpu0)
	if serving != origin {
		ours += cpu1 - cpu0
	}
	sc.OtherCores = max(0, (busy1-busy0-ours)/time.Since(wall0).Seconds())
	sc.RelayProfileTop = <-profDone
	if s, err := status(); err == nil {
		per := float64(e.updates * sc.Clients)
		sc.ClientResponsesPerUpdate = float64(s.Responses-before.Responses) / per
		sc.ClientResourcesPerUpdate = float64(s.Received-before.Received) / per
		sc.ClientBytesPerUpdate = float64(s.BytesReceived-before.BytesReceived) / per
	}
	after, err := stats()
	if err != nil {
		return err
	}
	u := float64(e.updates)
	sc.ServingCPUSPerUpdate = (cpu1 - cpu0) / u
	sc.OriginCPUSPerUpdate = (ocpu1 - ocpu0) / u
	sc.LoadgenCPUSPerUpdate = (lcpu1 - lcpu0) / u
	sc.OriginBytesPerUpdate = float64(after.BytesSent-idle.BytesSent) / u
	sc.OriginResponsesPerUpdate = float64(after.Responses-idle.Responses) / u

	// Reconnect storm: every client drops its stream and connection at once.
	if err := post("http://" + lgAdmin + "/reconnect"); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	err = waitUntil(ctx, scaled(stormTimeout, sc.Clients), "every client synced after the reconnect storm", func() (bool, error) {
		s, err := status()
		last = s
		return err == nil && len(s.Storms) > 0, err
	})
	if err != nil {
		return fmt.Errorf("%w (synced %d of %d, last stream error: %s)", err, last.Synced, sc.Clients, last.LastError)
	}
	sc.StormS, sc.StormCompleted = last.Storms[0].DurationS, last.Storms[0].Completed
	time.Sleep(settle)
	stormed, err := stats()
	if err != nil {
		return err
	}
	sc.StormOriginRequests = stormed.Requests - after.Requests

	// Loadgen's summary: the fan-out latency distribution. Closing N
	// streams and sorting every sample takes longer as N grows.
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
	if sc.FanoutSamples != e.updates*perUpdate {
		return fmt.Errorf("%d fan-out samples, want updates × changed resources × clients = %d", sc.FanoutSamples, e.updates*perUpdate)
	}
	return nil
}

// resourceName matches bench/origin's names.
func resourceName(authority string, i int) string {
	return fmt.Sprintf("xdstp://%s/envoy.config.endpoint.v3.ClusterLoadAssignment/bench/cla-%04d", authority, i)
}

// relayConfig is the relay's config for one scenario: one authority whose
// origin is the benchmark origin, spoken to in delta.
func relayConfig(listen, admin, authority, origin string) string {
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
  send_timeout: 60s
`, listen, admin, authority, origin)
}
