package relay

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name      string
		cfg       config.Log
		wantLines []string // substrings, one per line logged
		wantErr   string
	}{
		// Durations say their unit in both formats ("1.5s", as the
		// config writes them), never a bare number of seconds.
		{name: "json info drops debug", cfg: config.Log{Level: "info", Format: "json"},
			wantLines: []string{`"logger":"relay","msg":"info line","k":"v"`, `"msg":"warn line","wait":"1.5s","grace":"10s"}`}},
		{name: "console debug", cfg: config.Log{Level: "debug", Format: "console"},
			wantLines: []string{"DEBUG\trelay\tdebug line", "INFO\trelay\tinfo line\t{\"k\": \"v\"}", "WARN\trelay\twarn line\t{\"wait\": \"1.5s\", \"grace\": \"10s\"}"}},
		{name: "warn only", cfg: config.Log{Level: "warn", Format: "json"}, wantLines: []string{`"msg":"warn line"`}},
		{name: "bad level", cfg: config.Log{Level: "loud", Format: "json"}, wantErr: "log.level"},
		{name: "bad format", cfg: config.Log{Level: "info", Format: "xml"}, wantErr: "log.format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			lg, err := NewLogger(tt.cfg, &buf)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewLogger = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lg = lg.Named("relay")
			lg.Debug("debug line")
			lg.Sugar().Infow("info line", "k", "v")
			lg.Warn("warn line", zap.Duration("wait", 1500*time.Millisecond), zap.Duration("grace", 10*time.Second))
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != len(tt.wantLines) {
				t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(tt.wantLines), buf.String())
			}
			for i, want := range tt.wantLines {
				if !strings.Contains(lines[i], want) {
					t.Errorf("line %d = %q, want it to contain %q", i, lines[i], want)
				}
			}
		})
	}
}

// TestLoggerSamplesRepeats: one warning repeated 10000 times within a
// second is written logSampleFirst times, then one in logSampleThereafter;
// another message is not held back by it.
func TestLoggerSamplesRepeats(t *testing.T) {
	var buf bytes.Buffer
	lg, err := NewLogger(config.Log{Level: "info", Format: "json"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	for range 10000 {
		lg.Warn("client rejected a response")
	}
	lg.Warn("another line")
	got := strings.Count(buf.String(), "client rejected a response")
	// Within one second; a second boundary during the loop allows one more
	// first-N window.
	if max := 2*logSampleFirst + 10000/logSampleThereafter; got < logSampleFirst || got > max {
		t.Errorf("repeated warning written %d times, want between %d and %d", got, logSampleFirst, max)
	}
	if !strings.Contains(buf.String(), "another line") {
		t.Error("a different message was dropped")
	}
}
