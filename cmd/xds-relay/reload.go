package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/xds-relay/xds-relay/config"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin" // "admin" names the --admin flag here, and a test helper
)

// reloadTimeout bounds `xds-relay reload`: connecting, the reload itself
// and reading the answer.
const reloadTimeout = 30 * time.Second

// maxReloadAnswer bounds the answer printed (every problem of a refused
// config fits many times over).
const maxReloadAnswer = 1 << 20

// cmdReload is `xds-relay reload`: POST the admin reload endpoint, as
// SIGHUP does, for images without kill. It prints the relay's answer;
// exit 0 when the config was reloaded, 1 otherwise.
func cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	admin := fs.String("admin", config.DefaultAdmin, "the relay's admin `host:port` (or http://host:port)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+relayadmin.ReloadPath, nil)
	if err != nil {
		return usageError{fmt.Sprintf("--admin %q: %v", *admin, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReloadAnswer))
	if err != nil {
		return fmt.Errorf("POST %s: read the answer: %w", req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stdout, "%s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return errReported
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(body)))
	return nil
}
