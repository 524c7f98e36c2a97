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
  - name: b
    origins: ["h:2"]
delivery:
  deletion_guard:
    max_removed_share: 0.25
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Delivery{
		"a": {Validate: false, DeletionGuard: DeletionGuard{MaxRemovedShare: 0.25, MinResources: DefaultMinResources, ReleaseAfter: 30 * time.Second}},
		"b": {Validate: true, DeletionGuard: DeletionGuard{MaxRemovedShare: 0.25, MinResources: DefaultMinResources}},
		// Not configured: the top-level section.
		"other": {Validate: true, DeletionGuard: DeletionGuard{MaxRemovedShare: 0.25, MinResources: DefaultMinResources}},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, c.DeliveryOf(name)); diff != "" {
			t.Errorf("DeliveryOf(%s) (-want +got):\n%s", name, diff)
		}
	}
	if d := Default().Delivery; !d.Validate || d.DeletionGuard != (DeletionGuard{MaxRemovedShare: 0.5, MinResources: 10}) {
		t.Errorf("Default().Delivery = %+v, want validate on, guard at 0.5 over 10 resources, release by hand", d)
	}
}
