package integration

import (
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-relay/xds-relay/config"
)

// refuseRules serve the frontend per cluster and refuse the "legacy-*"
// clusters by a rule (the result refuse), and clients whose id is empty
// by refuse_empty.
const refuseRules = `
- name: no-legacy
  match: {node: {cluster: {prefix: "legacy-"}}}
  result: {refuse: {reason: "legacy clusters are served by the old relay"}}
- name: per-id
  default: true
  result:
    authority: ds.example
    group:
      - literal: "cluster="
      - node_field: cluster
      - literal: "/id="
      - {node_field: id, refuse_empty: true}
`

// TestAggregationRefuse: a client that a rule refuses gets
// FAILED_PRECONDITION naming the rule, its reason, the type and the node,
// on both variants, and the other clients carry on.
func TestAggregationRefuse(t *testing.T) {
	origin := newClusterSnapshotOrigin(t)
	origin.setClusterSnapshot("frontend", "f1", []string{"fe-a"}, []string{"fe-a"})
	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, refuseRules)
		c.Authorities[0].PlainNames = new(false)
	}, origin.addr)
	conn := dial(t, r.XDSAddr())

	served := newADSClient(t, conn, "delta", "fe-1", "frontend", nil)
	served.subscribe(resource.ClusterType)
	served.waitHolds(resource.ClusterType, "fe-a")

	tests := []struct {
		name, variant, id, cluster string
		want                       []string
	}{
		{"refuse result, delta", "delta", "old-1", "legacy-payments", []string{`"no-legacy"`, "legacy clusters are served by the old relay", `"old-1"`, `"legacy-payments"`, resource.ClusterType}},
		{"refuse result, sotw", "sotw", "old-2", "legacy-orders", []string{`"no-legacy"`, "legacy clusters are served by the old relay", `"old-2"`}},
		{"refuse_empty", "delta", "", "frontend", []string{`"per-id"`, "refuse_empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newADSClient(t, conn, tt.variant, tt.id, tt.cluster, nil)
			c.subscribe(resource.ClusterType)
			var st *status.Status
			if c.delta != nil {
				st = c.delta.Err()
			} else {
				st = c.sotw.Err()
			}
			if st.Code() != codes.FailedPrecondition {
				t.Fatalf("status %v, want FailedPrecondition", st)
			}
			for _, w := range tt.want {
				if !strings.Contains(st.Message(), w) {
					t.Errorf("status message %q does not name %s", st.Message(), w)
				}
			}
		})
	}

	// The served client carries on: a change reaches it.
	origin.setClusterSnapshot("frontend", "f2", []string{"fe-a", "fe-b"}, []string{"fe-a"})
	served.waitHolds(resource.ClusterType, "fe-a", "fe-b")
}
