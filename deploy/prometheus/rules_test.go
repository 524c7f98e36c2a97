package prometheus_test

import (
	"os/exec"
	"testing"
)

// promtool is Prometheus's rule checker (Debian's prometheus package;
// scripts/test-deps.sh installs it). Without it the tests skip, saying why.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian's prometheus package; `make test-deps` installs it as root): " + err.Error())
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
}

// The alert rules are valid rules.
func TestAlertRulesCheck(t *testing.T) {
	promtool(t, "check", "rules", "xds-relay-alerts.yaml")
}

// Each alert fires on its series and not on their look-alikes
// (xds-relay-alerts.test.yaml).
func TestAlertRulesUnitTests(t *testing.T) {
	promtool(t, "test", "rules", "xds-relay-alerts.test.yaml")
}
