package loadgen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Storm is one reconnect storm: how long until every client had its
// resources again (Completed), or until the next storm began (not Completed).
type Storm struct {
	Duration  time.Duration `json:"-"`
	DurationS float64       `json:"duration_s"`
	Completed bool          `json:"completed"`
}

// Status is a cheap copy of the fleet's counters, for progress lines and for a
// harness that waits for a phase to finish.
type Status struct {
	Clients         int     `json:"clients"`
	StreamsOpen     int64   `json:"streams_open"`
	StreamsOpened   int64   `json:"streams_opened"`
	Synced          int64   `json:"synced"`
	Responses       int64   `json:"responses"`
	BytesReceived   int64   `json:"bytes_received"` // serialized size of the responses (proto.Size; gRPC framing excluded)
	Acks            int64   `json:"acks"`
	Nacks           int64   `json:"nacks"`
	Received        int64   `json:"resources_received"`
	Stamped         int64   `json:"fanout_samples"`
	StreamErrors    int64   `json:"stream_errors"`
	InitialSyncS    float64 `json:"initial_sync_s"` // 0 until every client first synced
	StormInProgress bool    `json:"storm_in_progress"`
	Storms          []Storm `json:"storms"`
	LastError       string  `json:"last_error,omitempty"`
	// Newest is the resource version the fleet first received last, and
	// how many clients have it now: after an edit at the origin, the
	// edited resource's new version, climbing to every client.
	Newest *ClientVersion `json:"newest_version,omitempty"`
}

// SyncError is nil when every client has every name it subscribed to
// (in the current generation: after a reconnect storm, again); otherwise
// it wraps ErrNotSynced, saying how many did not and the last stream
// error. A run that ends with it measured nothing worth reporting.
func (s Status) SyncError() error {
	if s.Synced >= int64(s.Clients) {
		return nil
	}
	what := fmt.Sprintf("%d of %d clients synced", s.Synced, s.Clients)
	if s.InitialSyncS == 0 {
		what += ", and the fleet never did"
	}
	if s.LastError != "" {
		what += "; last stream error: " + s.LastError
	}
	return fmt.Errorf("%w: %s (a client is synced once it has every name it subscribed to)", ErrNotSynced, what)
}

// SyncError is Status.SyncError, saying also what the clients lack and
// why (the removal or resource error they received, or no answer).
func (s Summary) SyncError() error {
	err := s.Status.SyncError()
	if err == nil || len(s.Lacks) == 0 {
		return err
	}
	why := make([]string, 0, 3)
	for _, l := range s.Lacks[:min(len(s.Lacks), 3)] {
		why = append(why, l.String())
	}
	return fmt.Errorf("%w; they lack: %s", err, strings.Join(why, "; "))
}

// Summary is the fleet's result: Status plus what the fleet measured.
type Summary struct {
	Status
	Target       string   `json:"target"`
	Variant      Variant  `json:"variant"`
	TypeURL      string   `json:"type_url"`
	Conns        int      `json:"conns"`
	Subscription []string `json:"subscription"`
	// Window and Stride are the clients' windows of Subscription (0: every
	// client subscribes to all of it).
	Window int `json:"window,omitempty"`
	Stride int `json:"stride,omitempty"`
	// Envoy: the clients subscribed as Envoys (Config.Envoy), not to
	// Subscription.
	Envoy        bool   `json:"envoy,omitempty"`
	NodeIDPrefix string `json:"node_id_prefix"`
	VersionsSeen int    `json:"versions_seen"`
	// Versions are the newest version of each name and how many clients
	// have it, by name.
	Versions []ClientVersion `json:"versions"`
	// Lacks are what clients asked for and do not have at the end, by
	// type and reason (what the server said of it), most clients first.
	Lacks []Lack `json:"lacks,omitempty"`
	// LatencySource is "origin-stamp" (samples: receipt − push stamp, one
	// per client and stamped resource of an update) or "first-to-last" (samples: last − first
	// receipt across the fleet, one per updated version), or "" when no
	// update was seen.
	LatencySource string  `json:"latency_source"`
	Samples       int     `json:"samples"`
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	MaxMS         float64 `json:"max_ms"`
}

// Status returns a copy of the fleet's counters.
func (f *Fleet) Status() Status {
	st := Status{
		Clients:       len(f.clients),
		StreamsOpen:   f.streamsOpen.Load(),
		StreamsOpened: f.streamsOpened.Load(),
		Synced:        f.synced.Load(),
		Responses:     f.responses.Load(),
		BytesReceived: f.bytes.Load(),
		Acks:          f.acks.Load(),
		Nacks:         f.nacks.Load(),
		Received:      f.received.Load(),
		Stamped:       f.stamped.Load(),
		StreamErrors:  f.streamErrors.Load(),
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st.InitialSyncS = f.initialSync.Seconds()
	st.StormInProgress = !f.stormStart.IsZero()
	for _, s := range f.storms {
		s.DurationS = s.Duration.Seconds()
		st.Storms = append(st.Storms, s)
	}
	st.LastError = f.lastError
	st.Newest = f.clientVersions.newestLocked()
	return st
}

// Summary returns what the fleet measured so far.
func (f *Fleet) Summary() Summary {
	s := Summary{
		Status:       f.Status(),
		Target:       f.cfg.Target,
		Variant:      f.cfg.Variant,
		TypeURL:      f.cfg.TypeURL,
		Conns:        f.cfg.Conns,
		Subscription: f.cfg.subscription(),
		Window:       f.cfg.Window,
		Stride:       f.cfg.Stride,
		Envoy:        f.cfg.Envoy,
		NodeIDPrefix: f.cfg.NodeIDPrefix,
		Lacks:        f.lacks(),
	}
	var samples []time.Duration
	for _, c := range f.clients {
		samples = append(samples, c.samples()...)
	}
	if len(samples) > 0 {
		s.LatencySource = "origin-stamp"
	}
	f.mu.Lock()
	s.VersionsSeen = len(f.versions)
	s.Versions = f.clientVersions.latestLocked()
	if len(samples) == 0 {
		for _, v := range f.versions {
			if v.updates > 0 {
				samples = append(samples, v.lastUpdate.Sub(v.firstUpdate))
			}
		}
		if len(samples) > 0 {
			s.LatencySource = "first-to-last"
		}
	}
	f.mu.Unlock()
	s.Samples = len(samples)
	if len(samples) > 0 {
		slices.Sort(samples)
		s.P50MS = ms(percentile(samples, 0.50))
		s.P99MS = ms(percentile(samples, 0.99))
		s.MaxMS = ms(samples[len(samples)-1])
	}
	return s
}

// percentile returns the nearest-rank q-quantile of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ProgressLine is a one-line view of a Status, for a terminal.
func (s Status) ProgressLine() string {
	line := fmt.Sprintf("streams %d/%d  synced %d  responses %d (%d B)  acks %d  nacks %d  resources %d  fanout-samples %d  errors %d",
		s.StreamsOpen, s.Clients, s.Synced, s.Responses, s.BytesReceived, s.Acks, s.Nacks, s.Received, s.Stamped, s.StreamErrors)
	if s.Newest != nil {
		line += "  newest " + s.Newest.Short(s.Clients)
	}
	if s.StormInProgress {
		line += "  (reconnect storm)"
	}
	return line
}

// WriteText writes s for a human.
func (s Summary) WriteText(w io.Writer) error {
	subscribed := fmt.Sprintf("subscribed to %d name(s)", len(s.Subscription))
	switch {
	case s.Envoy:
		subscribed = "as Envoys: wildcard LDS and CDS, then RDS and EDS by name"
	case len(s.Subscription) == 0:
		subscribed = "subscribed to the wildcard"
	case s.Window > 0:
		subscribed = fmt.Sprintf("each subscribed to a window of %d of %d names (stride %d)", s.Window, len(s.Subscription), s.Stride)
	}
	typ := s.TypeURL
	if s.Envoy {
		typ = "LDS, CDS, RDS, EDS"
	}
	_, err := fmt.Fprintf(w, `target            %s (%s, %s)
clients           %d over %d connections, %s
node ids          %s-0 … %s-%d
streams           %d open, %d opened, %d errors
synced            %d of %d (initial sync %.3fs)
responses         %d (%d ACKed, %d NACKed), %d resources, %d bytes
versions seen     %d
fan-out latency   %s: %d samples, p50 %.2fms p99 %.2fms max %.2fms
`,
		s.Target, s.Variant, typ,
		s.Clients, s.Conns, subscribed,
		s.NodeIDPrefix, s.NodeIDPrefix, s.Clients-1,
		s.StreamsOpen, s.StreamsOpened, s.StreamErrors,
		s.Synced, s.Clients, s.InitialSyncS,
		s.Responses, s.Acks, s.Nacks, s.Received, s.BytesReceived,
		s.VersionsSeen,
		orNone(s.LatencySource), s.Samples, s.P50MS, s.P99MS, s.MaxMS)
	if err != nil {
		return err
	}
	if err := s.writeVersions(w); err != nil {
		return err
	}
	for i, st := range s.Storms {
		state := "all clients synced again"
		if !st.Completed {
			state = "interrupted by the next storm"
		}
		if _, err := fmt.Fprintf(w, "reconnect storm %d %.3fs, %s\n", i+1, st.DurationS, state); err != nil {
			return err
		}
	}
	if s.LastError != "" {
		if _, err := fmt.Fprintf(w, "last stream error %s\n", s.LastError); err != nil {
			return err
		}
	}
	return s.writeLacks(w)
}

// writeLacks writes what clients lack, and why.
func (s Summary) writeLacks(w io.Writer) error {
	for i, l := range s.Lacks {
		head := "lacking now      "
		if i > 0 {
			head = "                 "
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", head, l); err != nil {
			return err
		}
	}
	return nil
}

// maxVersionLines bounds the names whose newest version the text summary
// lists.
const maxVersionLines = 10

// writeVersions writes the newest version of each name and its clients.
func (s Summary) writeVersions(w io.Writer) error {
	for i, v := range s.Versions {
		if i == maxVersionLines {
			_, err := fmt.Fprintf(w, "                  … and %d more names\n", len(s.Versions)-i)
			return err
		}
		head := "newest versions  "
		if i > 0 {
			head = "                 "
		}
		if _, err := fmt.Fprintf(w, "%s %s %s v%d (%.12s): %d of %d clients\n", head, v.Type, v.Name, v.Ordinal, v.Version, v.Clients, s.Clients); err != nil {
			return err
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no updates seen"
	}
	return s
}
