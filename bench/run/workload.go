package main

import (
	"fmt"
	"strings"
)

// A workload says what each update of a scenario changes at the origin.
const (
	// workloadOne: each update replaces one resource (round-robin), as when
	// one service's endpoints change.
	workloadOne = "one"
	// workloadAll: each update replaces all R resources in one origin
	// change, as when a deploy touches every cluster or a snapshot origin
	// republishes a whole type.
	workloadAll = "all"
)

// changedPerUpdate is how many resources one update of workload changes
// when the origin holds resources: each client takes one fan-out sample
// per changed resource.
func changedPerUpdate(workload string, resources int) int {
	if workload == workloadAll {
		return resources
	}
	return 1
}

// pushURL is the origin admin's URL for one update of workload.
func pushURL(originAdmin, workload string) string {
	if workload == workloadAll {
		return "http://" + originAdmin + "/push?all=1"
	}
	return "http://" + originAdmin + "/push"
}

// checkWorkloads returns an error naming the first unknown workload.
func checkWorkloads(ws []string) error {
	if len(ws) == 0 {
		return fmt.Errorf("no workload: want %s and/or %s", workloadOne, workloadAll)
	}
	for _, w := range ws {
		if w != workloadOne && w != workloadAll {
			return fmt.Errorf("%q: want %s", w, strings.Join([]string{workloadOne, workloadAll}, " or "))
		}
	}
	return nil
}
