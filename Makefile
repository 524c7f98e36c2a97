# xds-relay: every developer and CI command lives here.
GO      ?= go
BIN     := bin/xds-relay
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build origin run test test-deps status-screenshot bench bench-pinned bench-50k bench-100k bench-fairness lint fuzz fuzz-config soak clean

# How build and origin compile: a static binary. The docs test
# (docs/commands_test.go) runs the README's make run and make origin with
# GOBUILD='go build -race', so they link from the tests' build cache
# instead of compiling every package once more.
GOBUILD ?= CGO_ENABLED=0 $(GO) build -trimpath

build:
	$(GOBUILD) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/xds-relay

# bin/bench-origin: the benchmark's go-control-plane origin (bench/origin),
# built as the relay is, for the README's "In front of a real origin".
origin:
	$(GOBUILD) -o bin/bench-origin ./bench/origin

run: build
	$(BIN) demo

# Every test and every Go benchmark once (so a change that breaks a
# benchmark fails here, not at the next make bench), in one pass with the
# race detector on: one build of each package, not a second one without
# -race (which cost a third of a cold run). The docs' command blocks run
# too (docs/commands_test.go: make build, make run, the load generator on
# the documented ports). Kept under 10 minutes cold on a 2-core machine
# (260 CPU-seconds, 8 minutes on a busy one; go test -json shows where
# the time goes).
test: test-deps
	$(GO) test -race -count=1 -timeout 9m -bench . -benchtime 1x ./...

# What tests need beyond Go: chromium for the status page test, promtool
# (Debian's prometheus) for the alert rules' tests (installed with apt-get
# when missing and possible; otherwise those tests skip, saying why).
test-deps:
	@sh scripts/test-deps.sh

# docs/status-page.png, the README's screenshot of the admin status page:
# the Chromium test's relay, origin and clients, captured at 1280x900.
status-screenshot: test-deps
	XDS_RELAY_SCREENSHOT=$(CURDIR)/docs/status-page.png $(GO) test -count=1 -run '^TestStatusPageInChromium$$' ./integration

# The benchmark: origin, relay and load generator on loopback, direct vs
# relayed, N = 1000 and 10000, delta and SotW, each update changing one
# resource or all of them; at N = 10000 the Envoy-shaped workload (1000
# resources, a window of 20 per client, 50 changed per update, xdstp and
# plain names); then the Go micro-benchmarks. Writes the published
# results, bench/results/latest.* and profiles/ (--publish; go run
# ./bench/run without it writes under bench/results/local/, which git
# ignores). Three modes: direct, relayed (the relay at its defaults) and
# bare (the relay with the propagation ledger and safe delivery off), so
# what those defaults cost is measured in the same run; about 9 minutes
# on 2 cores.
bench:
	$(GO) run ./bench/run --publish --modes direct,relayed,bare $(BENCHFLAGS)

# make bench's N = 10000 scenarios (workloads one, all and envoy, delta and
# SotW, direct and relayed) with each process pinned by taskset: the
# serving process (and, relayed, the origin beside the relay) on CPU 0, the
# load generator on CPU 1, so it no longer takes the serving process's CPU.
# Needs 2 CPUs and taskset (util-linux). Writes bench/results/latest-pinned.*
# and fanout_p99-pinned.png; shorter than make bench (no N = 1000, no
# micro-benchmarks).
bench-pinned:
	$(GO) run ./bench/run --publish --pin --clients 10000 --micro=false --name latest-pinned $(BENCHFLAGS)

# N = 50000 delta clients over 500 connections, every update changing all
# resources, direct vs relayed. Writes bench/results/latest-50k.* (latest.*
# stays as make bench left it).
bench-50k:
	$(GO) run ./bench/run --publish --clients 50000 --variants delta --workloads all --micro=false \
		--name latest-50k --timeout 30m $(BENCHFLAGS)

# N = 100000 clients over 1000 connections, delta and SotW, workloads all
# (every update changing all resources) and envoy (xdstp names), direct vs
# relayed: what one relay process holds on this machine, about 20
# minutes. Writes bench/results/latest-100k.*.
bench-100k:
	$(GO) run ./bench/run --publish --clients 100000 --variants delta,sotw --workloads all,envoy --names xdstp --micro=false \
		--name latest-100k --timeout 60m $(BENCHFLAGS)

# The fairness scenarios at N = 10000, delta and SotW, direct and relayed:
# 1% of the clients stop reading for 60 s while updates go on (parked), and
# one more client changes its subscription 100 times a second for 30 s
# (churn); the others' fan-out p99 against the same run's baseline (30 s
# of updates before). About 12 minutes, so not in make bench (which would
# pass its own 12). Writes
# bench/results/latest-fairness.{md,json}.
bench-fairness:
	$(GO) run ./bench/run --publish --clients 10000 --workloads= --fairness parked,churn --micro=false \
		--name latest-fairness --timeout 20m $(BENCHFLAGS)

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

FUZZTIME ?= 60s
# xdstp names, then sequences of client requests against real sessions
# (FuzzSessions: several clients on one cache; no panic, no leak, the
# other clients' view stays what the origin holds). FUZZTIME each.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/xdsname
	$(GO) test -run '^$$' -fuzz '^FuzzSessions$$' -fuzztime $(FUZZTIME) ./internal/downstream
	$(GO) test -run '^$$' -fuzz '^FuzzRetained$$' -fuzztime $(FUZZTIME) ./internal/downstream

# Config robustness: no YAML crashes or stalls Parse.
fuzz-config:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./config

SOAKTIME ?= 30m
# The soak (issue #11, integration/faults_soak_test.go): one relay, one origin
# and 200 clients in one process for SOAKTIME, clients leaving and joining,
# an update and a check of every client each round, an origin outage every
# 10 s; memory (RSS, live heap) and goroutines printed every minute. Fails
# if a client holds the wrong state or those figures keep growing. No race
# detector (it would dominate the memory figures); the test bounds its own
# time (SOAKTIME + 10m), hence -timeout 0.
soak:
	SOAKTIME=$(SOAKTIME) $(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./integration/

clean:
	rm -rf bin
