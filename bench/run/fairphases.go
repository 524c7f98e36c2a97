package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/xds-relay/xds-relay/internal/loadgen"
)

// stallMargin: no update is pushed this close to the stall's end, so that
// the updates measured reach the others while the stalled clients still
// do not read.
const stallMargin = time.Second

// catchUpPoll is how often the harness reads every client's counts while
// it waits for the stalled ones to catch up (each read is N counts).
const catchUpPoll = 100 * time.Millisecond

// parkedPhase stalls the stalling clients for the stall's length while
// updates go on, from the client counts after the baseline, and records
// what the others saw, what the stalled ones went through and what the
// relay counted.
func (r *fairRun) parkedPhase(ctx context.Context, base loadgen.ClientCounts) error {
	stall := time.Duration(r.shape.StallS * float64(time.Second))
	stalled := 0
	for i := range r.sc.Clients {
		if i%r.shape.StallEvery == 0 {
			stalled++
		}
	}
	reading := int64((r.sc.Clients - stalled) * r.sc.ChangedPerUpdate)
	p := &ParkedFigures{Stalled: stalled, StallS: r.shape.StallS}
	r.f.Parked = p
	if err := post(fmt.Sprintf("http://%s/stall?for=%s", r.lgAdmin, stall)); err != nil {
		return fmt.Errorf("stall: %w", err)
	}
	end := time.Now().Add(stall)
	// The stalled clients, waiting in Recv, read this one more update: it
	// is left out of the figures, and the wait counts the others only.
	newest, err := r.pushWait(ctx, reading)
	if err != nil {
		return fmt.Errorf("first update of the stall: %w", err)
	}
	time.Sleep(settle)
	if err := r.resync(); err != nil {
		return err
	}
	from, err := r.clientCounts()
	if err != nil {
		return err
	}
	for time.Until(end) > stallMargin {
		if newest, err = r.pushWait(ctx, reading); err != nil {
			return fmt.Errorf("update %d of the stall: %w", r.f.UpdatesDuring+1, err)
		}
		r.f.UpdatesDuring++
	}
	p.RelayParked = r.relayFigure("xds_relay_downstream_parked_streams")
	p.RelayParks = r.relayFigure("xds_relay_downstream_parked_total")
	to, err := r.clientCounts()
	if err != nil {
		return err
	}
	if r.f.During, err = r.latency(from, to, true); err != nil {
		return err
	}
	time.Sleep(time.Until(end))
	if err := r.catchUp(ctx, p, newest); err != nil {
		return err
	}
	caught, err := r.clientCounts()
	if err != nil {
		return err
	}
	r.stalledFigures(p, base, from, caught)
	p.RelaySlowDisconnects = r.relayFigure("xds_relay_downstream_slow_disconnects_total")
	return nil
}

// resync sets the fan-out samples the next update waits from to the load
// generator's count now.
func (r *fairRun) resync() error {
	st, err := r.status()
	if err != nil {
		return err
	}
	r.stamped = st.Stamped
	return nil
}

// catchUp waits, once the stall ended, until every client holds the
// update pushed at newest, and records how long that took.
func (r *fairRun) catchUp(ctx context.Context, p *ParkedFigures, newest int64) error {
	t0 := time.Now()
	deadline := t0.Add(scaled(syncTimeout, r.sc.Clients))
	for {
		c, err := r.clientCounts()
		if err != nil {
			return err
		}
		behind := 0
		for _, n := range c.Newest {
			if n < newest {
				behind++
			}
		}
		if behind == 0 {
			p.CatchUpS = time.Since(t0).Seconds()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d clients still behind the newest update %v after the stall", behind, time.Since(t0).Round(time.Millisecond))
		}
		time.Sleep(catchUpPoll)
	}
}

// stalledFigures records, from the client counts before the stall (base),
// after its first update (from) and once every client caught up (caught),
// how many stalled clients had to reconnect and what each received after
// the stall's first update.
func (r *fairRun) stalledFigures(p *ParkedFigures, base, from, caught loadgen.ClientCounts) {
	var sum int64
	for i := range r.sc.Clients {
		if i%r.shape.StallEvery != 0 {
			continue
		}
		if caught.Streams[i] > base.Streams[i] {
			p.Disconnected++
		}
		got := caught.Responses[i] - from.Responses[i]
		sum += got
		p.ResponsesMax = max(p.ResponsesMax, got)
	}
	if p.Stalled > 0 {
		p.ResponsesMean = float64(sum) / float64(p.Stalled)
	}
}

// churnPhase runs the churning client for the churn's length while
// updates go on, from the client counts after the baseline, and records
// what the others saw, what it got through and what the relay throttled.
func (r *fairRun) churnPhase(ctx context.Context, from loadgen.ClientCounts) error {
	c := &ChurnFigures{}
	r.f.Churn = c
	throttled0 := r.relayFigure("xds_relay_downstream_requests_throttled_total")
	requests0 := r.relayFigure("xds_relay_downstream_requests_total")
	st0, err := r.status()
	if err != nil {
		return err
	}
	if err := post(fmt.Sprintf("http://%s/churn?rate=%g", r.lgAdmin, r.shape.ChurnRate)); err != nil {
		return fmt.Errorf("churn: %w", err)
	}
	t0 := time.Now()
	end := t0.Add(time.Duration(r.shape.ChurnS * float64(time.Second)))
	all := int64(r.sc.Clients * r.sc.ChangedPerUpdate)
	for time.Now().Before(end) {
		if _, err := r.pushWait(ctx, all); err != nil {
			return fmt.Errorf("update %d of the churn: %w", r.f.UpdatesDuring+1, err)
		}
		r.f.UpdatesDuring++
	}
	if err := r.stopChurn(&c.Client); err != nil {
		return err
	}
	elapsed := time.Since(t0).Seconds()
	st1, err := r.status()
	if err != nil {
		return err
	}
	c.RelayThrottled, c.RelayChurnPerSec = -1, -1
	if relayedMode(r.sc.Mode) {
		// The relay's requests over the churn, less the fleet's (its ACKs).
		c.RelayThrottled = r.relayFigure("xds_relay_downstream_requests_throttled_total") - throttled0
		handled := r.relayFigure("xds_relay_downstream_requests_total") - requests0 - float64(st1.Acks+st1.Nacks-st0.Acks-st0.Nacks)
		c.RelayChurnPerSec = handled / elapsed
	}
	to, err := r.clientCounts()
	if err != nil {
		return err
	}
	r.f.During, err = r.latency(from, to, false)
	return err
}

// stopChurn stops the churning client and reads what it did.
func (r *fairRun) stopChurn(st *loadgen.ChurnStats) error {
	req, err := http.NewRequest(http.MethodDelete, "http://"+r.lgAdmin+"/churn", nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("stop the churn: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stop the churn: %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(st)
}
