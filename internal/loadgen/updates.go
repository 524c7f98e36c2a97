package loadgen

import "fmt"

// ClientCounts is what each client received since Run started, indexed by
// client: a harness takes one before and one after an update and hands
// both, with the names the update changed, to Config.TallyUpdate.
type ClientCounts struct {
	Responses []int64 `json:"responses"`
	Resources []int64 `json:"resources"`
	Bytes     []int64 `json:"bytes"` // serialized size of the responses (proto.Size; gRPC framing excluded)
	// Updated counts resources carrying a push stamp new to the client,
	// received while synced: the client's fan-out samples.
	Updated []int64 `json:"updated"`
	// Streams counts the streams each client opened: 1 while it was never
	// cut off (nor failed, nor reconnected in a storm).
	Streams []int64 `json:"streams"`
	// Newest is the newest push stamp each client received (Unix ns; 0
	// before one): whether it has the latest update.
	Newest []int64 `json:"newest_stamp_ns"`
}

// ClientCounts returns every client's totals so far. Each client's four
// figures are read one after the other while it may still receive: take
// it when the fleet is quiet.
func (f *Fleet) ClientCounts() ClientCounts {
	n := len(f.clients)
	cc := ClientCounts{Responses: make([]int64, n), Resources: make([]int64, n), Bytes: make([]int64, n), Updated: make([]int64, n),
		Streams: make([]int64, n), Newest: make([]int64, n)}
	for i, c := range f.clients {
		cc.Responses[i] = c.counts.responses.Load()
		cc.Resources[i] = c.counts.resources.Load()
		cc.Bytes[i] = c.counts.bytes.Load()
		cc.Updated[i] = c.counts.updated.Load()
		cc.Streams[i] = c.counts.streams.Load()
		cc.Newest[i] = c.counts.newest.Load()
	}
	return cc
}

// UpdateTally is what one or more updates did to the fleet, telling the
// clients whose subscription has a changed name (affected) from the
// others (unaffected). Add sums the tallies of several updates; per update
// and client means divide by Affected.
type UpdateTally struct {
	Updates int `json:"updates"`
	// Changed is the number of names the updates changed.
	Changed int `json:"changed"`
	// Affected and Unaffected count clients, once per update.
	Affected   int `json:"affected"`
	Unaffected int `json:"unaffected"`
	// ChangedInWindows is, over the affected clients, the changed names
	// their subscriptions have: what they would receive if sent only what
	// changed, each once.
	ChangedInWindows int64 `json:"changed_in_windows"`
	// What the affected clients received.
	AffectedResponses int64 `json:"affected_responses"`
	AffectedResources int64 `json:"affected_resources"`
	AffectedBytes     int64 `json:"affected_bytes"`
	AffectedUpdated   int64 `json:"affected_updated"`
	// Exact counts affected clients that received one response carrying
	// exactly the changed names of their subscription, each once.
	Exact int `json:"exact"`
	// What the unaffected clients received: 0 when nobody is told of a
	// change to what it does not have.
	UnaffectedResponses int64 `json:"unaffected_responses"`
	UnaffectedResources int64 `json:"unaffected_resources"`
	UnaffectedBytes     int64 `json:"unaffected_bytes"`
}

// Add adds o's figures to t's.
func (t *UpdateTally) Add(o UpdateTally) {
	t.Updates += o.Updates
	t.Changed += o.Changed
	t.Affected += o.Affected
	t.Unaffected += o.Unaffected
	t.ChangedInWindows += o.ChangedInWindows
	t.AffectedResponses += o.AffectedResponses
	t.AffectedResources += o.AffectedResources
	t.AffectedBytes += o.AffectedBytes
	t.AffectedUpdated += o.AffectedUpdated
	t.Exact += o.Exact
	t.UnaffectedResponses += o.UnaffectedResponses
	t.UnaffectedResources += o.UnaffectedResources
	t.UnaffectedBytes += o.UnaffectedBytes
}

// ChangedIn returns, per client, how many of changed its subscription
// has (a glob is never counted as having a name).
func (c Config) ChangedIn(changed []string) []int {
	c = c.withDefaults()
	set := make(map[string]bool, len(changed))
	for _, n := range changed {
		set[n] = true
	}
	out := make([]int, c.Clients)
	for i := range out {
		for _, n := range c.ClientSubscription(i) {
			if set[n] {
				out[i]++
			}
		}
	}
	return out
}

// TallyUpdate tallies one update that changed the names changed, from
// every client's counts before it and after it (with nothing else in
// between).
func (c Config) TallyUpdate(changed []string, before, after ClientCounts) (UpdateTally, error) {
	in := c.ChangedIn(changed)
	for what, n := range map[string][2]int{
		"responses": {len(before.Responses), len(after.Responses)}, "resources": {len(before.Resources), len(after.Resources)},
		"bytes": {len(before.Bytes), len(after.Bytes)}, "updated": {len(before.Updated), len(after.Updated)},
	} {
		if n[0] != len(in) || n[1] != len(in) {
			return UpdateTally{}, fmt.Errorf("loadgen: counts of %s for %d and %d clients, want %d", what, n[0], n[1], len(in))
		}
	}
	t := UpdateTally{Updates: 1, Changed: len(changed)}
	for i, want := range in {
		responses := after.Responses[i] - before.Responses[i]
		resources := after.Resources[i] - before.Resources[i]
		bytes := after.Bytes[i] - before.Bytes[i]
		updated := after.Updated[i] - before.Updated[i]
		if want == 0 {
			t.Unaffected++
			t.UnaffectedResponses += responses
			t.UnaffectedResources += resources
			t.UnaffectedBytes += bytes
			continue
		}
		t.Affected++
		t.ChangedInWindows += int64(want)
		t.AffectedResponses += responses
		t.AffectedResources += resources
		t.AffectedBytes += bytes
		t.AffectedUpdated += updated
		if responses == 1 && resources == int64(want) && updated == int64(want) {
			t.Exact++
		}
	}
	return t, nil
}
