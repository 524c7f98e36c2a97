package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/xds-relay/xds-relay/internal/loadgen"
)

// The fairness scenarios (--fairness): what one client that misbehaves
// costs the others, relayed and direct, each in a run of its own (fresh
// processes, workload all at the largest N):
//
//   - parked: 1 in StallEvery clients (1%) stop reading for Stall while
//     updates go on. The others' fan-out p99 over the stall against their
//     p99 over the updates before it (the baseline: same run, same pacing,
//     BaselineS long); how many stalled clients were disconnected (0 with the
//     relay's default downstream.slow_clients: park), what the relay
//     counted parked, what each stalled client received once it read
//     again, and how long until every one held the newest update.
//   - churn: one more client changes its subscription ChurnRate times a
//     second for ChurnFor while updates go on; the others' p99 against the
//     baseline, what the churning client got through, and what the relay
//     throttled (downstream.limits.requests_per_second).
//
// The stalling clients read on connections of their own with 64 KiB
// windows (loadgen --stall-every), so a server's sends to them wait once
// that much is unread; the relay's send_timeout is SendTimeout here (the
// other scenarios use 60 s), so that it parks them within the stall.

// The fairness scenarios' names.
const (
	fairParked = "parked"
	fairChurn  = "churn"
)

var fairnessKinds = []string{fairParked, fairChurn}

// fairnessShape is what the fairness scenarios do (the --stall… and
// --churn… flags).
type fairnessShape struct {
	Kinds      []string `json:"kinds"`
	StallEvery int      `json:"stall_every"` // 1 in StallEvery clients stalls: 100 is 1%
	StallS     float64  `json:"stall_s"`
	ChurnRate  float64  `json:"churn_rate"` // subscription changes a second
	ChurnS     float64  `json:"churn_s"`
	// BaselineS: the baseline updates go on this long (and at least
	// --updates of them), so that the baseline's p99 is taken over about
	// as many updates as the stall's or the churn's.
	BaselineS float64 `json:"baseline_s"`
	// SendTimeoutS is the relay's downstream.send_timeout in these
	// scenarios.
	SendTimeoutS float64 `json:"send_timeout_s"`
}

// check refuses an unknown kind or a shape the scenarios cannot run; nil
// is none.
func (s *fairnessShape) check() error {
	if s == nil {
		return nil
	}
	for _, k := range s.Kinds {
		if !slices.Contains(fairnessKinds, k) {
			return fmt.Errorf("--fairness: %q: want some of %v", k, fairnessKinds)
		}
	}
	if len(s.Kinds) > 0 && (s.StallEvery < 2 || s.StallS <= 0 || s.ChurnRate <= 0 || s.ChurnS <= 0 || s.SendTimeoutS <= 0 || s.BaselineS < 0) {
		return fmt.Errorf("--stall-every (%d) must be 2 or more, --stall (%vs), --churn-rate (%v), --churn-duration (%vs) and --fairness-send-timeout (%vs) positive, --fairness-baseline (%vs) not negative",
			s.StallEvery, s.StallS, s.ChurnRate, s.ChurnS, s.SendTimeoutS, s.BaselineS)
	}
	return nil
}

// Fairness is one fairness scenario and what it measured.
type Fairness struct {
	Kind    string `json:"kind"` // parked | churn
	Mode    string `json:"mode"`
	Variant string `json:"variant"`
	Clients int    `json:"clients"`
	Error   string `json:"error,omitempty"`
	// The others' fan-out latency (every client but the stalling ones;
	// the churning client is not one of the N) over the baseline updates
	// and over those during the stall or the churn, and the p99 ratio.
	Baseline        loadgen.Latency `json:"baseline"`
	During          loadgen.Latency `json:"during"`
	P99Ratio        float64         `json:"p99_ratio"`
	UpdatesBaseline int             `json:"updates_baseline"`
	UpdatesDuring   int             `json:"updates_during"`
	Parked          *ParkedFigures  `json:"parked,omitempty"`
	Churn           *ChurnFigures   `json:"churn,omitempty"`
}

// ParkedFigures are what the stalled clients went through.
type ParkedFigures struct {
	Stalled int     `json:"stalled"`
	StallS  float64 `json:"stall_s"`
	// Disconnected: stalled clients that had to open a new stream.
	Disconnected int `json:"disconnected"`
	// What each stalled client received from its last update before the
	// stall until it held the newest again: what was queued for it, then
	// the newest state (mean, largest).
	ResponsesMean float64 `json:"responses_mean"`
	ResponsesMax  int64   `json:"responses_max"`
	// CatchUpS: from the stall's end until every stalled client held the
	// newest update.
	CatchUpS float64 `json:"catch_up_s"`
	// The relay's counts near the stall's end (relayed; -1 direct):
	// xds_relay_downstream_parked_streams, _parked_total,
	// _slow_disconnects_total.
	RelayParked          float64 `json:"relay_parked"`
	RelayParks           float64 `json:"relay_parks"`
	RelaySlowDisconnects float64 `json:"relay_slow_disconnects"`
}

// ChurnFigures are what the churning client did and what it cost.
type ChurnFigures struct {
	Client loadgen.ChurnStats `json:"client"`
	// The relay's xds_relay_downstream_requests_throttled_total over the
	// churn, and the churning client's requests it handled a second
	// (xds_relay_downstream_requests_total less the fleet's ACKs); -1
	// direct.
	RelayThrottled   float64 `json:"relay_throttled"`
	RelayChurnPerSec float64 `json:"relay_churn_requests_per_s"`
}

// runFairnessAll runs the selected fairness scenarios at the largest N of
// the run, each variant and mode, into res; it reports whether any failed.
func (e *env) runFairnessAll(ctx context.Context, res *Results) (failed bool) {
	s := res.Settings
	if s.Fairness == nil || len(s.Fairness.Kinds) == 0 || len(s.Clients) == 0 {
		return false
	}
	n := slices.Max(s.Clients)
	for _, kind := range s.Fairness.Kinds {
		for _, v := range s.Variants {
			for _, m := range s.Modes {
				f := Fairness{Kind: kind, Mode: m, Variant: v, Clients: n}
				if err := ctx.Err(); err != nil {
					f.Error = "not run: " + err.Error()
				} else {
					t0 := time.Now()
					logf("fairness %s %s %s N=%d ...", kind, m, v, n)
					f = e.runFairness(ctx, *s.Fairness, f)
					logFairness(f, time.Since(t0))
				}
				failed = failed || f.Error != ""
				res.Fairness = append(res.Fairness, f)
			}
		}
	}
	return failed
}

func logFairness(f Fairness, took time.Duration) {
	if f.Error != "" {
		logf("  failed after %.1fs: %s", took.Seconds(), f.Error)
		return
	}
	logf("  %.1fs: others' p99 %.1f ms over %d updates, %.1f ms over %d baseline updates (%.2f×)",
		took.Seconds(), f.During.P99MS, f.UpdatesDuring, f.Baseline.P99MS, f.UpdatesBaseline, f.P99Ratio)
	if p := f.Parked; p != nil {
		logf("  %d stalled, %d disconnected; relay parked %.0f (parks %.0f, slow disconnects %.0f); %.1f responses each after the stall (max %d), caught up in %.2fs",
			p.Stalled, p.Disconnected, p.RelayParked, p.RelayParks, p.RelaySlowDisconnects, p.ResponsesMean, p.ResponsesMax, p.CatchUpS)
	}
	if c := f.Churn; c != nil {
		logf("  churning client: %d requests (%.1f/s of %.0f asked), %d responses; relay throttled %.0f, handled %.1f of its requests/s",
			c.Client.Requests, c.Client.Achieved, c.Client.Rate, c.Client.Responses, c.RelayThrottled, c.RelayChurnPerSec)
	}
}

// runFairness runs one fairness scenario: fresh processes, the clients'
// sync, the baseline updates, then the stall or the churn.
func (e *env) runFairness(ctx context.Context, shape fairnessShape, f Fairness) Fairness {
	sc := Scenario{Mode: f.Mode, Variant: f.Variant, Workload: workloadAll, Names: namesXDSTP, Clients: f.Clients,
		Conns: connsFor(f.Clients), Resources: e.resources, Window: e.resources, Updates: e.updates, ChangedPerUpdate: e.resources}
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			_ = children[i].stop() // shutting down: an exit status here says nothing about the figures
		}
	}()
	r, err := e.newScenarioRun(&sc, &children)
	if err == nil {
		r.tag = f.Kind + "-" + r.tag
		r.sendTimeout = time.Duration(shape.SendTimeoutS * float64(time.Second))
		if f.Kind == fairParked {
			r.loadgenArgs = []string{"--stall-every", strconv.Itoa(shape.StallEvery)}
		}
		fr := &fairRun{scenarioRun: r, shape: shape, f: &f}
		err = fr.run(ctx)
	}
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

// fairRun is one fairness scenario while it runs.
type fairRun struct {
	*scenarioRun
	shape fairnessShape
	f     *Fairness
	// stamped is the load generator's fan-out samples the updates so far
	// were waited for.
	stamped int64
}

func (r *fairRun) run(ctx context.Context) error {
	if err := r.startServing(ctx); err != nil {
		return err
	}
	if err := r.writeNames(); err != nil {
		return err
	}
	if err := r.syncPhase(ctx); err != nil {
		return err
	}
	time.Sleep(settle)
	st, err := r.status()
	if err != nil {
		return err
	}
	r.stamped = st.Stamped
	before, err := r.clientCounts()
	if err != nil {
		return err
	}
	all := int64(r.sc.Clients * r.sc.ChangedPerUpdate)
	end := time.Now().Add(time.Duration(r.shape.BaselineS * float64(time.Second)))
	for r.f.UpdatesBaseline < r.e.updates || time.Now().Before(end) {
		if _, err := r.pushWait(ctx, all); err != nil {
			return fmt.Errorf("baseline update %d: %w", r.f.UpdatesBaseline+1, err)
		}
		r.f.UpdatesBaseline++
	}
	time.Sleep(settle)
	after, err := r.clientCounts()
	if err != nil {
		return err
	}
	if r.f.Baseline, err = r.latency(before, after, r.f.Kind == fairParked); err != nil {
		return err
	}
	if r.f.Kind == fairParked {
		err = r.parkedPhase(ctx, after)
	} else {
		err = r.churnPhase(ctx, after)
	}
	if err == nil && r.f.Baseline.P99MS > 0 {
		r.f.P99Ratio = r.f.During.P99MS / r.f.Baseline.P99MS
	}
	return err
}

// pushWait pushes one update and waits until want more fan-out samples
// arrived (each client that reads takes one per changed resource), then
// pauses pushGap, as the main scenarios pace their updates. It returns
// the update's push stamp.
func (r *fairRun) pushWait(ctx context.Context, want int64) (int64, error) {
	var pushed struct {
		At int64 `json:"pushed_unix_nano"`
	}
	if err := postJSON(pushURL(r.originAdmin, workloadAll, r.e.envoy), &pushed); err != nil {
		return 0, fmt.Errorf("push: %w", err)
	}
	r.stamped += want
	target := r.stamped
	err := r.waitStatus(ctx, scaled(pushTimeout, r.sc.Clients), "an update at every client that reads", func(s loadgen.Status) bool {
		return s.Stamped >= target
	})
	if err != nil {
		return 0, fmt.Errorf("%w (%d of %d receipts)", err, r.last.Stamped-(target-want), want)
	}
	time.Sleep(pushGap)
	return pushed.At, nil
}

// latency is the others' fan-out latency between two client counts
// (without the stalling clients when exclude is set).
func (r *fairRun) latency(from, to loadgen.ClientCounts, exclude bool) (loadgen.Latency, error) {
	var l loadgen.Latency
	body, err := json.Marshal(loadgen.PhaseRequest{From: from.Updated, To: to.Updated, ExcludeStalling: exclude})
	if err != nil {
		return l, err
	}
	resp, err := httpClient.Post("http://"+r.lgAdmin+"/latency", "application/json", bytes.NewReader(body))
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("POST /latency: %s", resp.Status)
	}
	return l, json.NewDecoder(resp.Body).Decode(&l)
}

// relayFigure is the sum of the relay's metric name (relayed), -1 direct
// or when it cannot be read.
func (r *fairRun) relayFigure(name string) float64 {
	if !relayedMode(r.sc.Mode) {
		return -1
	}
	v, err := metricSum(r.relayAdmin, name)
	if err != nil {
		return -1
	}
	return v
}
