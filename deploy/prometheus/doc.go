// Package prometheus holds the relay's Prometheus alert rules
// (xds-relay-alerts.yaml), their unit tests (xds-relay-alerts.test.yaml)
// and the Go test that runs `promtool check rules` and `promtool test
// rules` on them in `make test`. The metric names they query are checked
// against a running relay by docs/metrics_test.go.
package prometheus
