// Package docs holds the relay's documentation (the Markdown files beside
// this one) and the tests that keep it true, so a doc that drifts from the
// code fails `make test`:
//   - metrics_test.go: docs/metrics.md is the one metrics table, row for
//     row what a relay exports; every series whose label values are known
//     at start exists at zero; the Grafana dashboard and the Prometheus
//     alert rules in deploy/ name only exported metrics;
//   - blocks_test.go: every YAML block of README.md, docs/*.md,
//     bench/README.md and deploy/**/README.md parses, and a relay config
//     block loads and validates; every relative link names a file that
//     exists, and every test a doc names as proof is defined;
//   - commands_test.go: every sh and console block of those docs runs as
//     pasted (in a directory like a clone, on the documented ports), and
//     shows what it says;
//   - architecture_test.go: every package imports only what
//     docs/architecture.md's table lets it, and no production function
//     is over 60 lines;
//   - layout_test.go: every internal/ package's README.md names each of
//     its files (doc.go aside), and every package that starts goroutines
//     runs goleak in its tests;
//   - citations_test.go: a section cited by its heading is a heading of
//     the file named; sizing figures are stated in one place;
//   - pointers_test.go: what Markdown and Go comments point to exists: a
//     cited section (in Go comments), a file, a package's identifier, a
//     type's member, a test, a Go file.
package docs
