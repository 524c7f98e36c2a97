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
// takes pushGap plus its fan-out, about 100µs per client on 2 cores and
// 10µs more per client for each further resource it changes (1000 clients,
// 10 resources of 1 KiB: fan-out p99 ≈ 70 ms for one, 160-220 ms for all).
func profileSeconds(updates, clients, changed int) int {
	perClient := 100*time.Microsecond + time.Duration(changed-1)*10*time.Microsecond
	perUpdate := pushGap + time.Duration(clients)*perClient
	return max(2, int((time.Duration(updates)*perUpdate).Seconds()+0.5))
}

// syncProfileSeconds is how long the relay's CPU profile of the initial
// sync or the reconnect storm of n clients runs: about as long as they
// take (relayed, 2 cores: 2-4 s at N = 10000), at least 2 s.
func syncProfileSeconds(n int) int { return max(2, (4*n+9999)/10000) }

// relayHeapTop fetches the relay's in-use heap at idle (after a GC) and
// returns its top (saved next to the CPU profiles).
func (e *env) relayHeapTop(admin, tag string) string {
	return e.fetchProfile("http://"+admin+"/debug/pprof/heap?gc=1", tag+"-relay-heap", 30*time.Second, "-sample_index=inuse_space")
}

// profileRelay fetches a CPU profile of the relay from its admin
// /debug/pprof/profile, saves it in profileDir and returns the top of
// `go tool pprof -top`, or a line saying why there is none.
func (e *env) profileRelay(admin, tag string, seconds int) string {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, seconds)
	return e.fetchProfile(url, tag+"-relay-cpu", time.Duration(seconds)*time.Second+30*time.Second)
}

// fetchProfile saves the profile at url as profileDir/name.prof and
// returns `go tool pprof -top` of it (also saved as name.txt), or a line
// saying why there is none.
func (e *env) fetchProfile(url, name string, timeout time.Duration, pprofArgs ...string) string {
	client := &http.Client{Timeout: timeout}
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
	path := filepath.Join(e.profileDir, name+".prof")
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
	args := append([]string{"tool", "pprof", "-top", "-nodecount=30"}, pprofArgs...)
	out, err := exec.CommandContext(ctx, e.goBin, append(args, e.relayBin, path)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("profile %s: pprof: %v: %s", path, err, out)
	}
	txt := strings.TrimSuffix(path, ".prof") + ".txt"
	if err := os.WriteFile(txt, out, 0o644); err != nil {
		return fmt.Sprintf("profile %s: %v", txt, err)
	}
	return string(out)
}
