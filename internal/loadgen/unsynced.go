package loadgen

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// noAnswer is why a client lacks a name the server said nothing of.
const noAnswer = "no answer"

// maxReasons bounds the reasons a summary lists (an origin's error
// messages may name resources); maxExamples the names each shows.
const (
	maxReasons  = 10
	maxExamples = 3
)

// Lack is one reason clients lack something they asked for: the type,
// what the server said (a removal, a resource error with its code and
// message, or "no answer"), how many clients and names, and a few names.
type Lack struct {
	Type     string   `json:"type"`
	Reason   string   `json:"reason"`
	Clients  int      `json:"clients"`
	Names    int      `json:"names"` // distinct names
	Examples []string `json:"examples"`
}

// String is the lack for a human: "eds demo-x: removed (does not exist)
// (5 clients, 1 name)".
func (l Lack) String() string {
	more, names := "", "names"
	if l.Names > len(l.Examples) {
		more = ", …"
	}
	if l.Names == 1 {
		names = "name"
	}
	return fmt.Sprintf("%s %s%s: %s (%d clients, %d %s)", l.Type, strings.Join(l.Examples, ", "), more, l.Reason, l.Clients, l.Names, names)
}

// lacks sums up, over every client, what it asked for and does not have
// now, by type and reason, most clients first; at most maxReasons.
func (f *Fleet) lacks() []Lack {
	by := make(map[[2]string]*Lack)
	names := make(map[[2]string]map[string]bool)
	for _, c := range f.clients {
		seen := make(map[[2]string]bool)
		c.lacking(func(typeURL, name, reason string) {
			k := [2]string{shortType(typeURL), reason}
			l := by[k]
			if l == nil {
				l = &Lack{Type: k[0], Reason: reason}
				by[k], names[k] = l, make(map[string]bool)
			}
			if !seen[k] {
				seen[k] = true
				l.Clients++
			}
			if !names[k][name] {
				names[k][name] = true
				l.Names++
				if len(l.Examples) < maxExamples {
					l.Examples = append(l.Examples, name)
				}
			}
		})
	}
	out := make([]Lack, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Lack) int {
		return cmp.Or(cmp.Compare(b.Clients, a.Clients), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Reason, b.Reason))
	})
	return out[:min(len(out), maxReasons)]
}

// lacking calls fn for each thing the client asked for and does not have
// now: a wildcard or glob not answered yet, a name missing, with why.
func (c *client) lacking(fn func(typeURL, name, reason string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ts := range c.types {
		if ts.collection && !ts.answered {
			name := "*"
			if len(ts.names) > 0 {
				name = ts.names[0]
			}
			fn(ts.typeURL, name, noAnswer)
		}
		for _, n := range ts.names {
			if _, ok := ts.have[n]; ok || isCollection(n) {
				continue
			}
			why := ts.why[n]
			if why == "" {
				why = noAnswer
			}
			fn(ts.typeURL, n, why)
		}
	}
}
