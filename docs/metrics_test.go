package docs

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/relay"
	"github.com/xds-relay/xds-relay/internal/relaytest"
	"github.com/xds-relay/xds-relay/internal/xdstest"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// family is what the metrics table says of a metric, and what a relay
// exports of it.
type family struct {
	typ    string   // counter, gauge, histogram, summary, untyped
	labels []string // sorted
}

func (f family) String() string {
	return fmt.Sprintf("%s with labels [%s]", f.typ, strings.Join(f.labels, ", "))
}

// row renders f as the docs/metrics.md row to add.
func (f family) row(name string) string {
	return fmt.Sprintf("| `%s` | %s | %s | <what it counts> |", name, f.typ, strings.Join(f.labels, ", "))
}

const metricsDoc = "metrics.md"

// tableRow is one metrics row of docs/metrics.md:
// | `xds_relay_…` | type | label, label | meaning |
var tableRow = regexp.MustCompile("^\\| `(xds_relay_[a-z0-9_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// documented reads the metrics table.
func documented(t *testing.T) map[string]family {
	t.Helper()
	data, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]family)
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `xds_relay_") {
			continue
		}
		m := tableRow.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s:%d: a metrics row must read | `xds_relay_name` | type | label, label | meaning |, one metric per row: %q", metricsDoc, i+1, line)
			continue
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s:%d: %s has a second row", metricsDoc, i+1, m[1])
		}
		f := family{typ: m[2], labels: []string{}}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		sort.Strings(f.labels)
		out[m[1]] = f
	}
	if len(out) == 0 {
		t.Fatalf("%s: no metrics rows found", metricsDoc)
	}
	return out
}

// testRelay is a relay with every optional metric on (cache.snapshot_path)
// and the authorities named, started; the test's cleanup closes it.
type testRelay struct {
	*relay.Relay
	reg *prometheus.Registry
	cfg *config.Config
}

func relayCfg(t *testing.T, snapshotDir string, authorities ...string) *config.Config {
	t.Helper()
	c := config.Default()
	c.Listen = "127.0.0.1:0"
	c.Admin = "127.0.0.1:0"
	c.Downstream.DrainDelay = 0
	c.ShutdownGracePeriod = 5 * time.Second
	c.Cache.SnapshotPath = filepath.Join(snapshotDir, "snapshot")
	// A listener that accepts and serves nothing: the relay's origin check
	// at start connects and passes (a refused one would count a failure on
	// a fresh relay); no client subscribes, so no stream is opened.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("origin listener: %v", err)
	}
	t.Cleanup(func() { lis.Close() })
	for _, a := range authorities {
		c.Authorities = append(c.Authorities, config.Authority{Name: a, Origins: []string{lis.Addr().String()},
			Transport: xdstype.TransportDelta, GlobCollections: config.GlobNative})
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	return c
}

// startRelay runs the relay process on relayCfg (relaytest.Run: the
// wiring cmd/xds-relay runs, on the registry it builds).
func startRelay(t *testing.T, authorities ...string) *testRelay {
	t.Helper()
	cfg := relayCfg(t, t.TempDir(), authorities...)
	reg := relay.NewRegistry("test")
	return &testRelay{Relay: relaytest.Run(t, cfg, nil, reg), reg: reg, cfg: cfg}
}

// get answers one admin request (so the admin counter has a series).
func (r *testRelay) get(t *testing.T, path string) {
	t.Helper()
	client := &http.Client{Timeout: xdstest.WaitTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + r.AdminAddr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// gather is every xds_relay_ family the relay exports, by name.
func (r *testRelay) gather(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily)
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "xds_relay_") {
			out[mf.GetName()] = mf
		}
	}
	return out
}

func exported(mf *dto.MetricFamily) family {
	f := family{typ: strings.ToLower(mf.GetType().String()), labels: []string{}}
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if !slices.Contains(f.labels, lp.GetName()) {
				f.labels = append(f.labels, lp.GetName())
			}
		}
	}
	sort.Strings(f.labels)
	return f
}

// registered is what a fresh relay exports (with cache.snapshot_path set,
// after one admin request), by name.
func registered(t *testing.T) map[string]family {
	t.Helper()
	r := startRelay(t, "auth.example")
	r.get(t, "/healthz")
	out := make(map[string]family)
	for name, mf := range r.gather(t) {
		out[name] = exported(mf)
	}
	return out
}

// docs/metrics.md is the one metrics table: every metric a relay exports
// has its row (name, type, label names), and every row is exported.
func TestMetricsTable(t *testing.T) {
	doc := documented(t)
	reg := registered(t)
	for _, name := range sortedKeys(reg) {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("a relay exports %s (%v), which docs/metrics.md does not list: add the row\n\t%s", name, reg[name], reg[name].row(name))
		case d.typ != reg[name].typ || !slices.Equal(d.labels, reg[name].labels):
			t.Errorf("docs/metrics.md lists %s as %v, but a relay exports it as %v: make its row\n\t%s", name, d, reg[name], reg[name].row(name))
		}
	}
	for _, name := range sortedKeys(doc) {
		if _, ok := reg[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which a fresh relay (cache.snapshot_path set, one admin request) does not export: "+
				"remove its row; or, if it is registered, create its series at zero at start (see \"Series from start\" in docs/metrics.md); "+
				"or, if it is registered only with a feature on, turn that feature on in relayCfg (docs/metrics_test.go)", name)
		}
	}
}

// labelValues are the values of each label known at start; a metric's own
// values (reason, result) by metric name. A series of every combination
// exists at zero on a fresh relay.
func labelValues(metric, label string, authorities []string) ([]string, bool) {
	switch label {
	case "type":
		return xdstype.Labels(), true
	case "authority":
		return authorities, true
	case "variant":
		return []string{"sotw", "delta"}, true
	case "limit":
		return []string{"streams", "names_per_stream", "name_length", "types_per_stream", "version_length", "groups_per_authority", "new_groups_per_stream"}, true
	}
	own := map[string][]string{
		"xds_relay_config_reloads_total/result":                {"ok", "invalid", "error"},
		"xds_relay_downstream_request_errors_total/reason":     {"malformed_name", "no_rule", "resolve", "unknown_authority", "type_not_carried", "dynamic_parameters"},
		"xds_relay_cache_snapshot_loads_total/result":          {"loaded", "absent", "corrupt", "incompatible", "foreign_config", "too_large", "untrusted", "error"},
		"xds_relay_cache_snapshot_writes_total/result":         {"ok", "truncated", "error"},
		"xds_relay_cache_snapshot_skipped_total/reason":        {"expired", "over_bounds", "other_authority"},
		"xds_relay_upstream_nacks_total/reason":                {"invalid", "other_authority"},
		"xds_relay_csds_requests_total/method":                 {"fetch", "stream", "debug"},
		"xds_relay_upstream_resource_errors_total/code":        cache.CodeLabels(),
		"xds_relay_downstream_resource_errors_sent_total/code": cache.CodeLabels(),
		"xds_relay_delivery_held/reason":                       delivery.Reasons(),
		"xds_relay_downstream_oversize_total/reason":           {"resource", "full_state"},
	}
	v, ok := own[metric+"/"+label]
	return v, ok
}

// notKnownAtStart are the metrics whose label values are not all known at
// start, with why.
var notKnownAtStart = map[string]string{
	"xds_relay_admin_requests_total": "code is known once a request is answered",
	"xds_relay_build_info":           "set once, to 1, by NewRegistry",
}

// combos is every combination of the label values, as "l1=v1,l2=v2" keys.
func combos(labels []string, values [][]string) []string {
	out := []string{""}
	for i, l := range labels {
		var next []string
		for _, prefix := range out {
			for _, v := range values[i] {
				sep := ","
				if prefix == "" {
					sep = ""
				}
				next = append(next, prefix+sep+l+"="+v)
			}
		}
		out = next
	}
	return out
}

// seriesKey is a series' labels as "l1=v1,l2=v2" (sorted by label name,
// as Gather sorts them).
func seriesKey(m *dto.Metric) string {
	parts := make([]string, 0, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		parts = append(parts, lp.GetName()+"="+lp.GetValue())
	}
	return strings.Join(parts, ",")
}

func seriesValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// checkSeriesFromStart fails for each series of known label values that
// the relay does not export (at zero, when fresh), and for each series of
// an authority in gone.
func checkSeriesFromStart(t *testing.T, fams map[string]*dto.MetricFamily, fresh bool, authorities, gone []string) {
	t.Helper()
	for _, name := range sortedKeys(fams) {
		mf := fams[name]
		if _, skip := notKnownAtStart[name]; skip {
			continue
		}
		f := exported(mf)
		if len(f.labels) == 0 {
			continue
		}
		values := make([][]string, len(f.labels))
		ok := true
		for i, l := range f.labels {
			if values[i], ok = labelValues(name, l, authorities); !ok {
				t.Errorf("%s has label %q, whose values at start docs/metrics_test.go does not know: "+
					"create its series at zero at start and list the values in labelValues, or say why they are not known in notKnownAtStart", name, l)
				break
			}
		}
		if !ok {
			continue
		}
		have := make(map[string]*dto.Metric)
		for _, m := range mf.GetMetric() {
			have[seriesKey(m)] = m
		}
		for _, want := range combos(f.labels, values) {
			m, ok := have[want]
			switch {
			case !ok:
				t.Errorf("%s{%s} does not exist: create it at zero when the metric is built (or when its authority is configured)", name, want)
			case fresh && seriesValue(m) != 0 && name != "xds_relay_cache_snapshot_loads_total":
				t.Errorf("%s{%s} = %v on a fresh relay, want 0", name, want, seriesValue(m))
			}
		}
		for key := range have {
			for _, a := range gone {
				if slices.Contains(strings.Split(key, ","), "authority="+a) {
					t.Errorf("%s{%s}: authority %s is no longer configured, its series should be deleted", name, key, a)
				}
			}
		}
	}
}

// Every series whose label values are known at start (types, variants,
// limits, reasons, results, configured authorities) exists at zero on a
// fresh relay; a reload adds an added authority's series and deletes a
// removed one's.
func TestSeriesFromStart(t *testing.T) {
	r := startRelay(t, "a.example", "b.example")
	checkSeriesFromStart(t, r.gather(t), true, []string{"a.example", "b.example"}, nil)
	if t.Failed() {
		return
	}

	next := relayCfg(t, filepath.Dir(r.cfg.Cache.SnapshotPath), "b.example", "c.example")
	if err := r.ReloadConfig(next); err != nil {
		t.Fatalf("ReloadConfig: %v", err)
	}
	checkSeriesFromStart(t, r.gather(t), false, []string{"b.example", "c.example"}, []string{"a.example"})
}

// promQLMetric is a metric name in a PromQL expression.
var promQLMetric = regexp.MustCompile(`\bxds_relay_[a-z0-9_]+`)

// checkQueries fails for each xds_relay_ name in exprs (by where) that the
// relay does not export (histograms: their _bucket, _sum and _count).
func checkQueries(t *testing.T, file string, exprs map[string]string, reg map[string]family) {
	t.Helper()
	if len(exprs) == 0 {
		t.Fatalf("%s: no queries found", file)
	}
	for _, where := range sortedKeys(exprs) {
		for _, name := range promQLMetric.FindAllString(exprs[where], -1) {
			if _, ok := reg[name]; ok {
				continue
			}
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if f, ok := reg[base]; ok && (f.typ == "histogram" || f.typ == "summary") {
				continue
			}
			t.Errorf("%s: %s names %s, which the relay does not export (docs/metrics.md lists what it does)", file, where, name)
		}
	}
}

// collectExprs gathers every query of a decoded Grafana dashboard (its
// panels' "expr", its variables' "definition"), named by its path.
func collectExprs(v any, path string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && (k == "expr" || k == "definition") {
				out[path+"."+k] = s
				continue
			}
			collectExprs(e, path+"."+k, out)
		}
	case []any:
		for i, e := range v {
			collectExprs(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// The Grafana dashboard and the alert rules in deploy/ query only metrics
// the relay exports.
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	reg := registered(t)

	const dashboard = "../deploy/grafana/xds-relay.json"
	data, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	exprs := make(map[string]string)
	collectExprs(dash, "", exprs)
	checkQueries(t, dashboard, exprs, reg)

	const rules = "../deploy/prometheus/xds-relay-alerts.yaml"
	data, err = os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var groups struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &groups); err != nil {
		t.Fatalf("%s: %v", rules, err)
	}
	exprs = make(map[string]string)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			exprs[g.Name+"/"+r.Alert+r.Record] = r.Expr
		}
	}
	checkQueries(t, rules, exprs, reg)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
