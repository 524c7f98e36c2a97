package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLoadgenCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{name: "every config problem at once", args: []string{"loadgen", "--target", "nohost", "--clients", "0"},
			wantCode: exitUsage, wantStderr: []string{"target", "clients", "names", "usage: xds-relay loadgen"}},
		{name: "bad variant", args: []string{"loadgen", "--target", "127.0.0.1:1", "--names", "a", "--variant", "rest"},
			wantCode: exitUsage, wantStderr: []string{`variant: "rest"`}},
		{name: "window larger than the names", args: []string{"loadgen", "--target", "127.0.0.1:1", "--names", "a,b", "--window", "3"},
			wantCode: exitUsage, wantStderr: []string{`window: 3: more than the 2 names`}},
		{name: "names and names file", args: []string{"loadgen", "--target", "127.0.0.1:1", "--names", "a", "--names-file", "x"},
			wantCode: exitUsage, wantStderr: []string{`--names and --names-file`}},
		{name: "positional argument", args: []string{"loadgen", "extra"},
			wantCode: exitUsage, wantStderr: []string{`unexpected argument "extra"`}},
		{name: "no client synced", args: []string{"loadgen", "--target", "127.0.0.1:1", "--names", "a", "--clients", "3", "--duration", "200ms", "--quiet"},
			wantCode: exitFail, wantStderr: []string{"xds-relay loadgen: loadgen: clients did not sync: 0 of 3 clients synced, and the fleet never did; last stream error: "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
