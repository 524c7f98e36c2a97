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
	InitialResourcesPerClient float64 `json:"initial_resources_per_client"`
	InitialBytesPerClient     float64 `json:"initial_bytes_per_client"`
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
	maxRun              time.Duration // loadgen --duration: a backstop only
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

func (e *env) scenario(ctx context.Context, sc *Scenario, children *[]*child) error {
	tag := fmt.Sprintf("%s-%s-%s-%d", sc.Mode, sc.Variant, sc.Workload, sc.Clients)
	if sc.Workload == workloadEnvoy {
		tag = fmt.Sprintf("%s-%s-%s-%s-%d", sc.Mode, sc.Variant, sc.Workload, sc.Names, sc.Clients)
	}
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
		"--resources", strconv.Itoa(sc.Resources), "--size", strconv.Itoa(e.resourceSize),
		"--authority", e.authority, "--names", sc.Names)
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

	names := make([]string, sc.Resources)
	for i := range names {
		names[i] = resourceName(sc.Names, e.authority, i)
	}
	namesFile := filepath.Join(e.logDir, tag+"-names.txt")
	if err := os.WriteFile(namesFile, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("names file: %w", err)
	}
	// The clients' subscriptions, as the load generator cuts them.
	subs := loadgen.Config{Clients: sc.Clients, Names: names}
	window := []string{}
	if sc.Workload == workloadEnvoy {
		subs.Window = sc.Window
		window = []string{"--window", strconv.Itoa(sc.Window), "--node-clusters", strconv.Itoa(e.envoy.NodeClusters)}
	}
	time.Sleep(settle) // let the serving process reach its idle footprint
	if sc.ServingRSSBeforeKiB, err = rssKiB(serving.pid()); err != nil {
		return fmt.Errorf("RSS before: %w", err)
	}

	lgArgs := append([]string{"loadgen",
		"--target", target, "--clients", strconv.Itoa(sc.Clients), "--conns", strconv.Itoa(sc.Conns),
		"--variant", sc.Variant, "--names-file", namesFile, "--admin", lgAdmin, "--json", "--quiet",
		"--duration", e.maxRun.String()}, window...)
	lg, err := start(e.logDir, tag+"-loadgen", e.relayBin, lgArgs...)
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
	clientCounts := func() (loadgen.ClientCounts, error) {
		var c loadgen.ClientCounts
		err := getJSON("http://"+lgAdmin+"/clients", &c)
		if err == nil && len(c.Responses) != sc.Clients {
			err = fmt.Errorf("counts of %d clients, want %d", len(c.Responses), sc.Clients)
		}
		return c, err
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
	counts, err := clientCounts()
	if err != nil {
		return fmt.Errorf("loadgen client counts: %w", err)
	}
	sc.InitialResponsesPerClient, sc.InitialMaxResponses = meanMax(counts.Responses)
	sc.InitialResourcesPerClient, _ = meanMax(counts.Resources)
	sc.InitialBytesPerClient, _ = meanMax(counts.Bytes)
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
			profDone <- e.profileRelay(relayAdmin, tag, profileSeconds(e.updates, sc.Clients, changedPerClient(sc)))
		}()
	} else {
		profDone <- ""
	}
	// Fan-out samples: one per client and changed resource its
	// subscription holds.
	var wantSamples int64
	var tally loadgen.UpdateTally
	for k := 1; k <= e.updates; k++ {
		var pushed struct {
			Names []string `json:"names"`
		}
		if err := postJSON(pushURL(originAdmin, sc.Workload, e.envoy), &pushed); err != nil {
			return fmt.Errorf("push %d: %w", k, err)
		}
		if sc.Workload == workloadEnvoy {
			for _, c := range subs.ChangedIn(pushed.Names) {
				wantSamples += int64(c)
			}
		} else {
			wantSamples += int64(sc.ChangedPerUpdate * sc.Clients)
		}
		want := before.Stamped + wantSamples
		err := waitUntil(ctx, scaled(pushTimeout, sc.Clients), fmt.Sprintf("update %d at every client", k), func() (bool, error) {
			s, err := status()
			last = s
			return err == nil && s.Stamped >= want, err
		})
		if err != nil {
			return fmt.Errorf("%w (%d of %d receipts)", err, last.Stamped-before.Stamped, wantSamples)
		}
		time.Sleep(pushGap)
		if sc.Workload == workloadEnvoy {
			// What this update did, client by client: what arrived since
			// the previous one had reached everyone.
			next, err := clientCounts()
			if err != nil {
				return fmt.Errorf("loadgen client counts: %w", err)
			}
			t, err := subs.TallyUpdate(pushed.Names, counts, next)
			if err != nil {
				return err
			}
			tally.Add(t)
			counts = next
		}
	}
	time.Sleep(settle)
	if sc.Workload == workloadEnvoy {
		sc.Envoy = envoyFigures(tally)
	}
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
// load onto this relay, and a scenario's end would wait it out.
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
  drain_delay: 0s
`, listen, admin, authority, origin)
}
