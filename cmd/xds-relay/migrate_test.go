package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xds-relay/xds-relay/config"
)

func TestMigrateRules(t *testing.T) {
	testdata := "../../internal/migrate/testdata/"
	dir := t.TempDir()
	writeBootstrap := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bootstrap := writeBootstrap("bootstrap.yaml", "origin_server:\n  address: {address: \"0.0.0.0\", port_value: 18123}\nserver: {address: {address: 0.0.0.0, port_value: 9991}}\n")
	selfBootstrap := writeBootstrap("self.yaml", "origin_server:\n  address: {address: \"0.0.0.0\", port_value: 18000}\nserver: {address: {address: 0.0.0.0, port_value: 18000}}\n")
	example := testdata + "bootstrap/earlier_example.yaml"
	placeholder := "    origins:\n      - ORIGIN-HOST:PORT # placeholder: your origin control plane's host:port\n"
	const invalidPlaceholder = `authorities[0].origins[0] (line 11): "ORIGIN-HOST:PORT" is neither host:port nor file://DIR`
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // substrings
		wantStderr []string
		validates  bool   // stdout is a config that loads and validates
		invalid    string // or: stdout does not validate, for this reason only
	}{
		{
			// Without --origin or --bootstrap the origin is not known:
			// a placeholder, said on stderr, that does not validate.
			name:     "converts, file before the flags",
			args:     []string{testdata + "per_cluster_and_type.yaml", "--authority", "mesh"},
			wantCode: exitOK,
			invalid:  invalidPlaceholder,
			wantStdout: []string{
				"# Converted by xds-relay migrate-rules from ",
				"  - name: mesh\n" + placeholder + "    transport: sotw\n    plain_names: false\n",
				"from: node.cluster",
				"refuse_empty: true",
				"reason: the earlier relay refused EDS requests without resource names",
			},
			wantStderr: []string{"migrate-rules: no --origin or --bootstrap: authorities[0].origins[0] is the placeholder ORIGIN-HOST:PORT; write your origin control plane's host:port there\n"},
		},
		{
			name:       "origin from the earlier relay's bootstrap",
			args:       []string{"--bootstrap", bootstrap, testdata + "word_per_type.yaml"},
			wantCode:   exitOK,
			validates:  true,
			wantStdout: []string{"listen: 0.0.0.0:9991\n", "      - 127.0.0.1:18123\n"},
		},
		{
			// The earlier relay's own example: its origin 0.0.0.0:18000 is
			// this relay's default listen port, so its server address
			// (where its clients connect) becomes listen; every setting
			// is listed with where it goes now.
			name:      "the earlier relay's example bootstrap",
			args:      []string{"--bootstrap", example, testdata + "word_per_type.yaml"},
			wantCode:  exitOK,
			validates: true,
			wantStdout: []string{
				"relay forwarded the first client's node).\nlisten: 0.0.0.0:9991\nadmin: 0.0.0.0:6070\nlog:\n  level: debug\nnode:\n  id: xds-relay\n",
				"    origins:\n      - 127.0.0.1:18000\n",
			},
			wantStderr: []string{"migrate-rules: the earlier relay's bootstrap " + example + ", setting by setting:\n" +
				"  origin_server.address 0.0.0.0:18000 → authorities[0].origins[0]: 127.0.0.1:18000 (0.0.0.0 dials this machine)\n" +
				"  server.address 0.0.0.0:9991 → listen: 0.0.0.0:9991 (where clients connect)\n" +
				"  admin.address 0.0.0.0:6070 → admin: 0.0.0.0:6070 (its pages are this relay's: docs/operations.md, Admin pages)\n" +
				"  logging.level DEBUG → log.level: debug\n" +
				"  logging.path /dev/stdout → no equivalent: this relay logs to stderr (log.format json or console); redirect it, or let the service manager collect it\n" +
				"  cache.ttl 120s → no equivalent: a resource is kept while the origin has it and sent again only when it changes; what no client watches is bounded by cache.max_resources and cache.max_bytes\n" +
				"  cache.max_entries 100 → no equivalent: the earlier relay counted aggregation keys; this relay bounds resources no client watches (cache.max_resources, default 100000; cache.max_bytes)\n" +
				"  metrics_sink.statsd 127.0.0.1:8125 → no equivalent: use the Prometheus metrics at the admin address's /metrics (docs/metrics.md)\n"},
		},
		{
			name:       "an origin that is this relay's listener, by any spelling",
			args:       []string{"--origin", "localhost:18000", testdata + "word_per_type.yaml"},
			wantCode:   exitOK,
			invalid:    invalidPlaceholder,
			wantStdout: []string{placeholder},
			wantStderr: []string{"migrate-rules: the origin localhost:18000 would be this relay's own listen address (127.0.0.1:18000), and the relay would ask itself: authorities[0].origins[0] is the placeholder ORIGIN-HOST:PORT. Write your origin control plane's host:port there; if it is localhost:18000, also set listen to another address"},
		},
		{
			name:       "a bootstrap whose origin is its own server",
			args:       []string{"--bootstrap", selfBootstrap, testdata + "word_per_type.yaml"},
			wantCode:   exitOK,
			invalid:    `authorities[0].origins[0] (line 12): "ORIGIN-HOST:PORT"`,
			wantStdout: []string{"listen: 0.0.0.0:18000\n", placeholder},
			wantStderr: []string{"migrate-rules: the origin 127.0.0.1:18000 would be this relay's own listen address (0.0.0.0:18000)"},
		},
		{
			name:       "the bootstrap given as the rules file",
			args:       []string{example},
			wantCode:   exitUsage,
			wantStderr: []string{"earlier_example.yaml: this looks like the earlier relay's bootstrap (it has server, origin_server, logging, cache, metrics_sink, admin), not its aggregation rules: pass it with --bootstrap "},
		},
		{
			name:       "the rules file given as the bootstrap",
			args:       []string{"--bootstrap", testdata + "word_per_type.yaml", testdata + "word_per_type.yaml"},
			wantCode:   exitFail,
			wantStderr: []string{"word_per_type.yaml: this looks like the earlier relay's aggregation rules (it has fragments), not its bootstrap: pass it as the rules file"},
		},
		{
			name:       "verify: no differences",
			args:       []string{"--verify", "--requests", "2000", testdata + "v2_and_v3_types.yaml"},
			wantCode:   exitOK,
			wantStdout: []string{"v2_and_v3_types.yaml: 8 converted rules; 2000 requests replayed: ", ", 0 differences\n"},
		},
		{
			name:       "refused: names the rule, the path and why",
			args:       []string{testdata + "refuse_second_name.yaml"},
			wantCode:   exitFail,
			wantStdout: []string{"refuse_second_name.yaml: cannot be converted: fragments[0].rules[1].result.resource_names_fragment.element: is 1: "},
		},
		{
			name:       "not an earlier-relay file",
			args:       []string{testdata + "missing_match.yaml"},
			wantCode:   exitFail,
			wantStderr: []string{"not an earlier-relay rules file: fragments[0].rules[0].match: required"},
		},
		{
			name:       "no file",
			args:       []string{"--verify"},
			wantCode:   exitUsage,
			wantStderr: []string{"the earlier relay's rules file is required", "usage: xds-relay migrate-rules"},
		},
		{
			name:       "bad request count",
			args:       []string{"--requests", "0", testdata + "word_per_type.yaml"},
			wantCode:   exitUsage,
			wantStderr: []string{"--requests must be positive"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), append([]string{"migrate-rules"}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout does not contain %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr.String())
				}
			}
			if tt.validates {
				if _, err := config.Parse(stdout.Bytes(), "migrated.yaml"); err != nil {
					t.Errorf("the printed config does not validate: %v", err)
				}
			}
			if tt.invalid != "" {
				_, err := config.Parse(stdout.Bytes(), "migrated.yaml")
				if ps := config.Problems(err); len(ps) != 1 || !strings.Contains(ps[0].Error(), tt.invalid) {
					t.Errorf("the printed config: %v; want one problem: %s", err, tt.invalid)
				}
			}
		})
	}
}
