package integration

import (
	"sort"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
)

func memberNames(rs []*cache.Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	sort.Strings(out)
	return out
}

// TestUpstreamEmulatedGlob: over go-control-plane (no glob support) the
// relay subscribes the type's wildcard once and computes membership,
// context parameters and deletions included.
func TestUpstreamEmulatedGlob(t *testing.T) {
	o := newGCPOrigin(t)
	l1, l2, l3 := ldsPrefix+"dir/l1", ldsPrefix+"dir/l2?env=prod", ldsPrefix+"other/l3"
	deep := ldsPrefix + "dir/sub/l5"
	for _, n := range []string{l1, l2, l3, deep} {
		o.set(resource.ListenerType, n, listener(n))
	}
	// The deletion guard off: removing l1 empties dir/*, which safe
	// delivery would hold (integration/delivery_test.go tests that).
	noGuard := func(c *config.Config) { c.Delivery.DeletionGuard.MaxRemovedShare = 1 }
	r := newRelay(t, noGuard, config.Authority{Name: "auth", Origins: []string{o.addr}, GlobCollections: config.GlobEmulated})

	g := ldsKey(ldsPrefix + "dir/*")
	w := newWatcher()
	r.c.Watch(w, nil, g)
	w.waitFor(t, "glob known", func() bool { return r.c.LookupMembers(g).State == cache.StatePresent })
	ms := r.c.LookupMembers(g).Members
	if diff := cmp.Diff([]string{l1}, memberNames(ms)); diff != "" {
		t.Errorf("dir/* members (-want +got):\n%s", diff)
	}

	// A second glob, with context parameters, rides on the same wildcard
	// and is complete at once.
	gp := ldsKey(ldsPrefix + "dir/*?env=prod")
	w2 := newWatcher()
	r.c.Watch(w2, nil, gp)
	w2.waitFor(t, "param glob known", func() bool { return r.c.LookupMembers(gp).State == cache.StatePresent })
	ms = r.c.LookupMembers(gp).Members
	if diff := cmp.Diff([]string{l2}, memberNames(ms)); diff != "" {
		t.Errorf("dir/*?env=prod members (-want +got):\n%s", diff)
	}

	// Deletion and addition at the origin flow to glob watchers.
	l4 := ldsPrefix + "dir/l4"
	o.del(resource.ListenerType, l1)
	o.set(resource.ListenerType, l4, listener(l4))
	// Notify follows the cache update, so wait for both.
	w.waitFor(t, "l1 removed, l4 added, both notified", func() bool {
		ms := r.c.LookupMembers(g).Members
		return cmp.Equal([]string{l4}, memberNames(ms)) && w.count(ldsKey(l1).Name) >= 2 && w.count(ldsKey(l4).Name) >= 1
	})

	o.mu.Lock()
	defer o.mu.Unlock()
	if diff := cmp.Diff([]string{"*"}, subscribedNames(o.deltaReqs, resource.ListenerType, false)); diff != "" {
		t.Errorf("origin subscriptions (-want +got):\n%s", diff)
	}
}

// TestUpstreamEmulatedGlobRefcount: emulated globs share one upstream
// wildcard, which is unsubscribed only when the last of them is evicted.
func TestUpstreamEmulatedGlobRefcount(t *testing.T) {
	o := newGCPOrigin(t)
	a1, b1 := ldsPrefix+"a/l1", ldsPrefix+"b/l1"
	for _, n := range []string{a1, b1} {
		o.set(resource.ListenerType, n, listener(n))
	}
	// Nothing unwatched is kept: unwatching evicts at once.
	r := newRelay(t, func(c *config.Config) { c.Cache.MaxResources = 0 }, config.Authority{Name: "auth", Origins: []string{o.addr}, GlobCollections: config.GlobEmulated})
	ga, gb := ldsKey(ldsPrefix+"a/*"), ldsKey(ldsPrefix+"b/*")
	w := newWatcher()
	r.c.Watch(w, nil, ga, gb)
	w.waitNotified(t, ldsKey(a1).Name, 1)
	w.waitNotified(t, ldsKey(b1).Name, 1)

	r.c.Unwatch(w, ga)
	w2 := newWatcher()
	r.c.Watch(w2, nil, gb) // a hit, notified of b's member
	if got := w2.count(ldsKey(b1).Name); got != 1 {
		t.Errorf("glob b after glob a was evicted: notified %d times of its member, want 1", got)
	}
	o.mu.Lock()
	unsubs := subscribedNames(o.deltaReqs, resource.ListenerType, true)
	o.mu.Unlock()
	if len(unsubs) != 0 {
		t.Errorf("wildcard unsubscribed while glob b still needs it: %v", unsubs)
	}

	r.c.Unwatch(w, gb)
	r.c.Unwatch(w2, gb)
	o.waitFor("wildcard unsubscribed", func() bool {
		return cmp.Equal([]string{"*"}, subscribedNames(o.deltaReqs, resource.ListenerType, true))
	})
	o.mu.Lock()
	subs := subscribedNames(o.deltaReqs, resource.ListenerType, false)
	o.mu.Unlock()
	if diff := cmp.Diff([]string{"*"}, subs); diff != "" {
		t.Errorf("origin subscriptions (-want +got):\n%s", diff)
	}
}
