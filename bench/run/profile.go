package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profileSeconds roughly covers the update phase of a scenario: each update
// takes pushGap plus its fan-out, about 100µs per client on 2 cores.
func profileSeconds(updates, clients int) int {
	perUpdate := pushGap + time.Duration(clients)*100*time.Microsecond
	return max(2, int((time.Duration(updates)*perUpdate).Seconds()+0.5))
}

// profileRelay fetches a CPU profile of the relay from its admin
// /debug/pprof/profile, saves it in profileDir and returns the top of
// `go tool pprof -top`, or a line saying why there is none.
func (e *env) profileRelay(admin, tag string, seconds int) string {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, seconds)
	client := &http.Client{Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "no profile: " + err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "no profile: GET " + url + ": " + resp.Status
	}
	if err := os.MkdirAll(e.profileDir, 0o755); err != nil {
		return "no profile: " + err.Error()
	}
	path := filepath.Join(e.profileDir, tag+"-relay-cpu.prof")
	f, err := os.Create(path)
	if err != nil {
		return "no profile: " + err.Error()
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "no profile: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.goBin, "tool", "pprof", "-top", "-nodecount=30", e.relayBin, path).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("profile %s: pprof: %v: %s", path, err, out)
	}
	txt := strings.TrimSuffix(path, ".prof") + ".txt"
	if err := os.WriteFile(txt, out, 0o644); err != nil {
		return fmt.Sprintf("profile %s: %v", txt, err)
	}
	return string(out)
}
