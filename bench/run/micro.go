package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Micro is one Go micro-benchmark result.
type Micro struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// Extra holds custom metrics the benchmark reported (b.ReportMetric).
	Extra map[string]float64 `json:"extra,omitempty"`
}

// runMicro runs the Go micro-benchmarks under ./internal/... and parses
// their results. It returns the raw output as well, for the log.
func runMicro(ctx context.Context, goBin, benchtime string) ([]Micro, string, error) {
	cmd := exec.CommandContext(ctx, goBin, "test", "-run", "^$", "-bench", ".", "-benchmem",
		"-benchtime", benchtime, "./internal/...")
	out, err := cmd.CombinedOutput()
	ms := parseMicro(out)
	if err != nil {
		return ms, string(out), fmt.Errorf("go test -bench: %w", err)
	}
	return ms, string(out), nil
}

// parseMicro reads `go test -bench` output: "pkg: P" lines name the package
// of the Benchmark lines that follow.
func parseMicro(out []byte) []Micro {
	var res []Micro
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		m := Micro{Package: pkg, Name: f[0]}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				m.NsPerOp = v
			case "B/op":
				m.BytesPerOp = v
			case "allocs/op":
				m.AllocsPerOp = v
			default:
				if m.Extra == nil {
					m.Extra = make(map[string]float64)
				}
				m.Extra[f[i+1]] = v
			}
		}
		res = append(res, m)
	}
	return res
}
