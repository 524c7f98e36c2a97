package main

import (
	"fmt"
	"strconv"
	"strings"
)

// A workload says what each client subscribes to and what each update of a
// scenario changes at the origin.
const (
	// workloadOne: every client subscribes to all R resources; each update
	// replaces one resource (round-robin), as when one service's endpoints
	// change.
	workloadOne = "one"
	// workloadAll: every client subscribes to all R resources; each update
	// replaces all R in one origin change, as when a deploy touches every
	// cluster or a snapshot origin republishes a whole type.
	workloadAll = "all"
	// workloadEnvoy: the origin holds many resources (envoyShape.Resources)
	// and each client subscribes to its own window of them, overlapping its
	// neighbours' (Envoys of different services, each wanting the clusters
	// its service calls); each update replaces a seeded random few percent
	// of them in one origin change (a deploy). Some clients' windows hold a
	// changed name (affected), most hold one or two, the others none.
	workloadEnvoy = "envoy"
)

var workloads = []string{workloadOne, workloadAll, workloadEnvoy}

// Name schemes of the resources (bench/origin --names). Workloads one and
// all use xdstp names; envoy runs with each scheme of the run.
const (
	namesXDSTP = "xdstp"
	namesPlain = "plain"
)

// envoyShape is the envoy workload's shape.
type envoyShape struct {
	Resources int `json:"resources"` // R at the origin
	Window    int `json:"window"`    // W names per client
	Changed   int `json:"changed"`   // K names changed by each update
	// NodeClusters is how many node clusters the clients are spread over
	// (the relay keeps one upstream stream per cluster for plain names).
	NodeClusters int `json:"node_clusters"`
}

// changedPerUpdate is how many resources one update of workload changes
// when the origin holds resources.
func changedPerUpdate(workload string, resources int, shape envoyShape) int {
	switch workload {
	case workloadAll:
		return resources
	case workloadEnvoy:
		return shape.Changed
	}
	return 1
}

// pushURL is the origin admin's URL for one update of workload.
func pushURL(originAdmin, workload string, shape envoyShape) string {
	switch workload {
	case workloadAll:
		return "http://" + originAdmin + "/push?all=1"
	case workloadEnvoy:
		return "http://" + originAdmin + "/push?count=" + strconv.Itoa(shape.Changed)
	}
	return "http://" + originAdmin + "/push"
}

// checkWorkloads returns an error naming the first unknown workload.
func checkWorkloads(ws []string) error {
	if len(ws) == 0 {
		return fmt.Errorf("no workload: want some of %s", strings.Join(workloads, ", "))
	}
	for _, w := range ws {
		if !isWorkload(w) {
			return fmt.Errorf("%q: want one of %s", w, strings.Join(workloads, ", "))
		}
	}
	return nil
}

func isWorkload(w string) bool {
	for _, k := range workloads {
		if w == k {
			return true
		}
	}
	return false
}

// checkNameSchemes returns an error naming the first unknown scheme.
func checkNameSchemes(ss []string) error {
	if len(ss) == 0 {
		return fmt.Errorf("no name scheme: want %s and/or %s", namesXDSTP, namesPlain)
	}
	for _, s := range ss {
		if s != namesXDSTP && s != namesPlain {
			return fmt.Errorf("%q: want %s or %s", s, namesXDSTP, namesPlain)
		}
	}
	return nil
}

// check returns an error naming every field of s out of range.
func (s envoyShape) check() error {
	var bad []string
	if s.Resources < 1 {
		bad = append(bad, fmt.Sprintf("--envoy-resources %d: want at least 1", s.Resources))
	}
	if s.Window < 1 || s.Window > s.Resources {
		bad = append(bad, fmt.Sprintf("--window %d: want 1..%d (--envoy-resources)", s.Window, s.Resources))
	}
	if s.Changed < 1 || s.Changed > s.Resources {
		bad = append(bad, fmt.Sprintf("--changed %d: want 1..%d (--envoy-resources)", s.Changed, s.Resources))
	}
	if s.NodeClusters < 1 {
		bad = append(bad, fmt.Sprintf("--node-clusters %d: want at least 1", s.NodeClusters))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

// schemesFor is the name schemes workload runs with.
func schemesFor(workload string, schemes []string) []string {
	if workload == workloadEnvoy {
		return schemes
	}
	return []string{namesXDSTP}
}

// clientsFor is the client counts workload runs at: envoy at the largest
// only (the targets' N, to keep `make bench` short), the others at all.
func clientsFor(workload string, ns []int) []int {
	if workload != workloadEnvoy || len(ns) == 0 {
		return ns
	}
	n := ns[0]
	for _, c := range ns {
		n = max(n, c)
	}
	return []int{n}
}

// label names a workload with its names scheme where it has a choice:
// "one", "all", "envoy xdstp", "envoy plain".
func label(workload, names string) string {
	if workload == workloadEnvoy {
		return workload + " " + names
	}
	return workload
}
