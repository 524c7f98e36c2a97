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
	bootstrap := filepath.Join(t.TempDir(), "bootstrap.yaml")
	if err := os.WriteFile(bootstrap, []byte("origin_server:\n  address: {address: \"0.0.0.0\", port_value: 18123}\nserver: {address: {address: 0.0.0.0, port_value: 9991}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // substrings
		wantStderr []string
		validates  bool // stdout is a config that loads and validates
	}{
		{
			name:      "converts, file before the flags",
			args:      []string{testdata + "per_cluster_and_type.yaml", "--authority", "mesh"},
			wantCode:  exitOK,
			validates: true,
			wantStdout: []string{
				"# Converted by xds-relay migrate-rules from ",
				"  - name: mesh\n    origins:\n      - 127.0.0.1:18000\n    transport: sotw\n    plain_names: false\n",
				"from: node.cluster",
				"refuse_empty: true",
				"reason: the earlier relay refused EDS requests without resource names",
			},
		},
		{
			name:       "origin from the earlier relay's bootstrap",
			args:       []string{"--bootstrap", bootstrap, testdata + "word_per_type.yaml"},
			wantCode:   exitOK,
			validates:  true,
			wantStdout: []string{"      - 127.0.0.1:18123\n"},
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
		})
	}
}
