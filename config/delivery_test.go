package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidateDelivery(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{name: "defaults", yaml: minimalAuthorities},
		{name: "guard off, released after a minute", yaml: minimalAuthorities +
			"delivery:\n  validate: false\n  deletion_guard:\n    max_removed_share: 1\n    min_resources: 0\n    release_after: 1m\n"},
		{name: "share over 1, count and duration negative", yaml: minimalAuthorities +
			"delivery:\n  deletion_guard:\n    max_removed_share: 1.5\n    min_resources: -1\n    release_after: -1s\n",
			want: []problem{
				{"delivery.deletion_guard.max_removed_share", 6, "must be from 0 to 1"},
				{"delivery.deletion_guard.min_resources", 7, "must not be negative"},
				{"delivery.deletion_guard.release_after", 8, "must not be negative"},
			}},
		{name: "an authority's override is checked at its own path", yaml: minimalAuthorities +
			"    delivery:\n      deletion_guard:\n        max_removed_share: -0.1\n",
			want: []problem{{"authorities[0].delivery.deletion_guard.max_removed_share", 6, "must be from 0 to 1"}}},
		{name: "an unknown key", yaml: minimalAuthorities + "delivery:\n  nack_breakers: 3\n",
			want: []problem{{"delivery.nack_breakers", 5, "unknown key"}}},
		{name: "waves by share and by cluster, the breaker off", yaml: minimalAuthorities +
			"delivery:\n  nack_breaker:\n    clients: 0\n  waves:\n    - {share: 0.01, min_wait: 10s}\n    - {node_clusters: [\"canary-*\"], min_wait: 10s}\n  ack_share: 1\n  max_wait: 2m\n"},
		{name: "breaker, waves, ack_share and max_wait out of range", yaml: minimalAuthorities +
			"delivery:\n  nack_breaker:\n    clients: -1\n  waves:\n    - {share: 0.6, node_clusters: [a]}\n    - {share: 0}\n    - {node_clusters: [\"\"], min_wait: -1s}\n    - {share: 0.7}\n  ack_share: 0\n  max_wait: 0s\n",
			want: []problem{
				{"delivery.nack_breaker.clients", 6, "must not be negative"},
				{"delivery.waves[0]", 8, "set share or node_clusters, not both"},
				{"delivery.waves[1].share", 9, "must be above 0 and at most 1"},
				{"delivery.waves[2].node_clusters[0]", 10, "must not be empty"},
				{"delivery.waves[2].min_wait", 10, "must not be negative"},
				{"delivery.ack_share", 12, "must be above 0 and at most 1"},
				{"delivery.max_wait", 13, "must be a positive duration"},
			}},
		{name: "shares over the whole fleet", yaml: minimalAuthorities +
			"delivery:\n  waves:\n    - {share: 0.6}\n    - {share: 0.7}\n",
			want: []problem{{"delivery.waves", 5, "the shares sum to 1.3,"}}},
		{name: "an authority's waves and breaker at its own path", yaml: minimalAuthorities +
			"    delivery:\n      nack_breaker: {clients: -2}\n      waves: [{share: 2}]\n",
			want: []problem{
				{"authorities[0].delivery.nack_breaker.clients", 5, "must not be negative"},
				{"authorities[0].delivery.waves[0].share", 6, "must be above 0 and at most 1"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			if diff := diffProblems(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// An authority's delivery replaces the top-level keys it sets, and only
// those.
func TestDeliveryOf(t *testing.T) {
	c, err := Parse([]byte(`authorities:
  - name: a
    origins: ["h:1"]
    delivery:
      validate: false
      deletion_guard:
        release_after: 30s
      nack_breaker: {clients: 1}
      waves: [{node_clusters: ["canary-*"], min_wait: 5s}]
      max_wait: 10s
  - name: b
    origins: ["h:2"]
delivery:
  deletion_guard:
    max_removed_share: 0.25
  ack_share: 0.9
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	top := Delivery{Validate: true, DeletionGuard: DeletionGuard{MaxRemovedShare: 0.25, MinResources: DefaultMinResources},
		NackBreaker: NackBreaker{Clients: 3}, AckShare: 0.9, MaxWait: time.Minute}
	a := top
	a.Validate, a.DeletionGuard.ReleaseAfter, a.NackBreaker.Clients, a.MaxWait = false, 30*time.Second, 1, 10*time.Second
	a.Waves = []Wave{{NodeClusters: []string{"canary-*"}, MinWait: 5 * time.Second}}
	want := map[string]Delivery{
		"a": a,
		"b": top,
		// Not configured: the top-level section.
		"other": top,
	}
	for name, w := range want {
		if diff := cmp.Diff(w, c.DeliveryOf(name)); diff != "" {
			t.Errorf("DeliveryOf(%s) (-want +got):\n%s", name, diff)
		}
	}
	if d := Default().Delivery; !d.Validate || d.DeletionGuard != (DeletionGuard{MaxRemovedShare: 0.5, MinResources: 10}) ||
		d.NackBreaker.Clients != 3 || d.Waves != nil || d.AckShare != 0.99 || d.MaxWait != time.Minute {
		t.Errorf("Default().Delivery = %+v, want validate on, guard at 0.5 over 10 resources, release by hand, breaker at 3, no waves, ack_share 0.99, max_wait 1m", d)
	}
}
