package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/config"
	relayadmin "github.com/xds-relay/xds-relay/internal/admin"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/xdstest"
)

// aggRules groups CDS and EDS per node cluster (frontend, backend), puts
// canary clients (metadata track=canary) in one group presented upstream as
// the node the rule sets, and has no default rule: any other client is
// refused.
const aggRules = `
- name: canary
  match:
    node:
      metadata: [{path: deploy.track, value: {exact: canary}}]
  result:
    authority: ds.example
    group: [{literal: canary}]
    node: {id: relay-canary, cluster: canary}
- name: per-cluster
  match:
    type_urls:
      - type.googleapis.com/envoy.config.cluster.v3.Cluster
      - type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
    node:
      cluster: {regex: "(frontend|backend)"}
  result:
    authority: ds.example
    group: [{literal: "cluster="}, {capture: {from: node.cluster, group: 1}}]
`

// setClusterSnapshot sets what the origin (newClusterSnapshotOrigin)
// answers nodes of one cluster.
func (o *gcpOrigin) setClusterSnapshot(cluster, version string, clusters, endpoints []string) {
	o.t.Helper()
	var cs, es []types.Resource
	for _, n := range clusters {
		cs = append(cs, &clusterv3.Cluster{Name: n})
	}
	for _, n := range endpoints {
		es = append(es, &endpointv3.ClusterLoadAssignment{ClusterName: n})
	}
	o.setSnapshotOf(cluster, version, map[resource.Type][]types.Resource{resource.ClusterType: cs, resource.EndpointType: es})
}

// streamNodes returns how many streams the origin opened (delta and SotW)
// and the node ("id/cluster") each presented first, sorted.
func (o *gcpOrigin) streamNodes() (opens int, nodes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range o.firstNodes {
		if n != nil {
			nodes = append(nodes, n.GetId()+"/"+n.GetCluster())
		}
	}
	sort.Strings(nodes)
	return o.deltaOpens + o.sotwOpens, nodes
}

// fullNodes returns the full node each stream presented first, in no order.
func (o *gcpOrigin) fullNodes() []*corev3.Node {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*corev3.Node, 0, len(o.firstNodes))
	for _, n := range o.firstNodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// waitStreams waits until the origin has seen streams with exactly these
// nodes.
func (o *gcpOrigin) waitStreams(want []string) {
	o.t.Helper()
	xdstest.Await(o.t, "origin streams", o.poke, func() error {
		if opens, got := o.streamNodes(); opens != len(want) || !cmp.Equal(want, got) {
			return fmt.Errorf("%d opened, nodes %v; want %v", opens, got, want)
		}
		return nil
	})
}

func decodeAggRules(t testing.TB, src string) []aggregation.Rule {
	t.Helper()
	var rules []aggregation.Rule
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("rules: %v", err)
	}
	return rules
}

// TestAggregationGroups runs clients of two node clusters (delta and SotW)
// and canary clients through the relay against an origin that answers per
// node cluster: each group gets its own resources and never another's, the
// origin sees one stream per group rather than per client, and a client no
// rule matches is refused without disturbing the others.
func TestAggregationGroups(t *testing.T) {
	origin := newClusterSnapshotOrigin(t)
	origin.setClusterSnapshot("frontend", "f1", []string{"fe-a", "fe-b"}, []string{"fe-a"})
	origin.setClusterSnapshot("backend", "b1", []string{"be-a"}, []string{"be-a"})
	origin.setClusterSnapshot("canary", "c1", []string{"canary-a"}, []string{"canary-a"})

	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, aggRules)
		c.Authorities[0].PlainNames = new(false) // refuse what no rule matches
	}, origin.addr)
	conn := dial(t, r.XDSAddr())

	clients := []struct {
		c                  *adsClient
		wantCDS, eds       []string
		wantEDS, notWanted []string
	}{
		{c: newADSClient(t, conn, "delta", "fe-1", "frontend", nil), wantCDS: []string{"fe-a", "fe-b"}, eds: []string{"fe-a"}, wantEDS: []string{"fe-a"}},
		{c: newADSClient(t, conn, "sotw", "fe-2", "frontend", nil), wantCDS: []string{"fe-a", "fe-b"}, eds: []string{"fe-a"}, wantEDS: []string{"fe-a"}},
		{c: newADSClient(t, conn, "delta", "fe-3", "frontend", nil), wantCDS: []string{"fe-a", "fe-b"}, eds: []string{"fe-a"}, wantEDS: []string{"fe-a"}},
		// be-1 also asks for the frontend's endpoints by name: its group's
		// origin node does not have them, and it must not get the frontend's.
		{c: newADSClient(t, conn, "delta", "be-1", "backend", nil), wantCDS: []string{"be-a"}, eds: []string{"be-a", "fe-a"}, wantEDS: []string{"be-a"}},
		{c: newADSClient(t, conn, "sotw", "be-2", "backend", nil), wantCDS: []string{"be-a"}, eds: []string{"be-a"}, wantEDS: []string{"be-a"}},
		// Canary clients of both clusters share the canary group and its node.
		{c: newADSClient(t, conn, "delta", "fe-canary", "frontend", map[string]any{"deploy": map[string]any{"track": "canary"}}), wantCDS: []string{"canary-a"}, eds: []string{"canary-a"}, wantEDS: []string{"canary-a"}},
		{c: newADSClient(t, conn, "sotw", "be-canary", "backend", map[string]any{"deploy": map[string]any{"track": "canary"}}), wantCDS: []string{"canary-a"}, eds: []string{"canary-a"}, wantEDS: []string{"canary-a"}},
	}
	for _, cl := range clients {
		cl.c.subscribe(resource.ClusterType)
		cl.c.waitHolds(resource.ClusterType, cl.wantCDS...)
		cl.c.subscribe(resource.EndpointType, cl.eds...)
		cl.c.waitHolds(resource.EndpointType, cl.wantEDS...)
	}

	// One upstream stream per group, presenting the rule's node, or only
	// the group key's field (the cluster) with the relay's own id: never a
	// client's id, whichever client came first.
	wantStreams := []string{"xds-relay/frontend", "xds-relay/backend", "relay-canary/canary"}
	sort.Strings(wantStreams)
	origin.waitStreams(wantStreams)

	// A client no rule matches is refused with a status naming type and node.
	other := newADSClient(t, conn, "delta", "stray-1", "payments", nil)
	other.subscribe(resource.ClusterType)
	st := other.delta.Err()
	if st.Code() != codes.FailedPrecondition {
		t.Errorf("unmatched client: status %v, want FailedPrecondition", st)

	}
	for _, want := range []string{resource.ClusterType, `"stray-1"`, `"payments"`, "no aggregation rule matches"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("unmatched client: status message %q does not name %s", st.Message(), want)
		}
	}

	// The others carry on: an update for the frontend reaches exactly the
	// frontend group; the backend and canary groups hear nothing.
	origin.setClusterSnapshot("frontend", "f2", []string{"fe-a", "fe-b", "fe-c"}, []string{"fe-a"})
	for _, cl := range clients[:3] {
		cl.c.waitHolds(resource.ClusterType, "fe-a", "fe-b", "fe-c")
	}
	for _, cl := range clients[3:] {
		cl.c.quiet()
		if diff := cmp.Diff(cl.wantCDS, cl.c.names(resource.ClusterType)); diff != "" {
			t.Errorf("%s clusters (-want +got):\n%s", cl.c.name, diff)
		}
		if diff := cmp.Diff(cl.wantEDS, cl.c.names(resource.EndpointType)); diff != "" {
			t.Errorf("%s endpoints (-want +got):\n%s", cl.c.name, diff)
		}
	}
	// Still one stream per group: neither more clients nor the refused one
	// opened another.
	if opens, nodes := origin.streamNodes(); opens != len(wantStreams) || !cmp.Equal(wantStreams, nodes) {
		t.Errorf("origin streams: %d opened, nodes %v; want %v", opens, nodes, wantStreams)
	}

	// /debug/clients shows each client's group key.
	groups := debugGroups(t, "http://"+r.AdminAddr()+relayadmin.ClientsPath)
	wantGroups := map[string][]string{
		"fe-1": {"cluster=frontend"}, "fe-2": {"cluster=frontend"}, "fe-3": {"cluster=frontend"},
		"be-1": {"cluster=backend"}, "be-2": {"cluster=backend"},
		"fe-canary": {"canary"}, "be-canary": {"canary"},
	}
	if diff := cmp.Diff(wantGroups, groups); diff != "" {
		t.Errorf("/debug/clients groups by node id (-want +got):\n%s", diff)
	}
}

// debugGroups reads /debug/clients: node id → group keys.
func debugGroups(t *testing.T, url string) map[string][]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var infos []downstream.ClientInfo
	if err := json.NewDecoder(resp.Body).Decode(&infos); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	out := map[string][]string{}
	for _, ci := range infos {
		if _, dup := out[ci.NodeID]; dup {
			t.Fatalf("%s: node %q listed twice", url, ci.NodeID)
		}
		out[ci.NodeID] = ci.Groups
	}
	return out
}

// TestAggregationDefaultRule checks that a default rule serves the clients
// no earlier rule matches, grouped as it says, instead of refusing them.
func TestAggregationDefaultRule(t *testing.T) {
	origin := newClusterSnapshotOrigin(t)
	origin.setClusterSnapshot("frontend", "f1", []string{"fe-a"}, nil)
	origin.setClusterSnapshot("payments", "p1", []string{"pay-a", "pay-b"}, nil)
	origin.setClusterSnapshot("orders", "o1", []string{"ord-a"}, nil)

	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, `
- name: frontend
  match: {node: {cluster: {exact: frontend}}}
  result: {authority: ds.example, group: [{literal: fe}], node: {cluster: frontend}}
- name: rest
  default: true
  result: {authority: ds.example, group: [{literal: "cluster="}, {node_field: cluster}]}
`)
	}, origin.addr)
	conn := dial(t, r.XDSAddr())

	tests := []struct {
		variant, id, cluster string
		want                 []string
	}{
		{"delta", "fe-1", "frontend", []string{"fe-a"}},
		{"sotw", "pay-1", "payments", []string{"pay-a", "pay-b"}},
		{"delta", "pay-2", "payments", []string{"pay-a", "pay-b"}},
		{"delta", "ord-1", "orders", []string{"ord-a"}},
	}
	for _, tt := range tests {
		c := newADSClient(t, conn, tt.variant, tt.id, tt.cluster, nil)
		c.subscribe(resource.ClusterType)
		c.waitHolds(resource.ClusterType, tt.want...)
	}
	// The relay's id with the cluster the rule sets or the group key holds.
	origin.waitStreams([]string{"xds-relay/frontend", "xds-relay/orders", "xds-relay/payments"})
}

// TestForgedNodeNotShownUpstream: the first client of a group keyed on
// node.cluster sends a forged id and metadata; the origin is shown only the
// group's cluster with the relay's id, on the one stream every later client
// of the group shares.
func TestForgedNodeNotShownUpstream(t *testing.T) {
	origin := newClusterSnapshotOrigin(t)
	origin.setClusterSnapshot("payments", "p1", []string{"pay-a"}, nil)
	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, `
- name: per-cluster
  default: true
  result: {authority: ds.example, group: [{literal: "cluster="}, {node_field: cluster}]}
`)
	}, origin.addr)
	conn := dial(t, r.XDSAddr())
	forger := newADSClient(t, conn, "delta", "admin-override", "payments", map[string]any{"role": "superuser"})
	forger.subscribe(resource.ClusterType)
	forger.waitHolds(resource.ClusterType, "pay-a")
	origin.waitStreams([]string{"xds-relay/payments"})

	honest := newADSClient(t, conn, "delta", "pay-7", "payments", nil)
	honest.subscribe(resource.ClusterType)
	honest.waitHolds(resource.ClusterType, "pay-a")
	origin.waitStreams([]string{"xds-relay/payments"})
}

// TestGroupNodeFromKey: two clients of different full clusters (staging-1,
// staging-2) share the group a capture of the cluster and a metadata value
// build. Whichever subscribes first, the origin sees one stream presenting
// the node built from the group key alone: the captured cluster "staging",
// the metadata key part at its path, the relay's id; neither client's full
// cluster, id or other metadata.
func TestGroupNodeFromKey(t *testing.T) {
	const rules = `
- name: per-env
  match:
    node:
      cluster: {regex: "(?P<env>[a-z]+)-[0-9]+"}
  result:
    authority: ds.example
    group:
      - capture: {from: node.cluster, group: env}
      - literal: "_cds/team="
      - node_field: metadata.team.name
`
	want := &corev3.Node{Id: "xds-relay", Cluster: "staging"}
	md, err := structpb.NewStruct(map[string]any{"team": map[string]any{"name": "payments"}})
	if err != nil {
		t.Fatal(err)
	}
	want.Metadata = md
	clients := []struct{ id, cluster string }{{"envoy-1", "staging-1"}, {"envoy-2", "staging-2"}}
	for _, order := range []string{"staging-1 first", "staging-2 first"} {
		t.Run(order, func(t *testing.T) {
			origin := newClusterSnapshotOrigin(t)
			origin.setClusterSnapshot("staging", "s1", []string{"stg-a"}, nil)
			r := startRelay(t, func(c *config.Config) {
				c.Aggregation.Rules = decodeAggRules(t, rules)
			}, origin.addr)
			conn := dial(t, r.XDSAddr())
			cs := clients
			if order == "staging-2 first" {
				cs = []struct{ id, cluster string }{clients[1], clients[0]}
			}
			for _, cl := range cs {
				md := map[string]any{"team": map[string]any{"name": "payments", "lead": cl.id}, "instance": cl.id}
				c := newADSClient(t, conn, "delta", cl.id, cl.cluster, md)
				c.subscribe(resource.ClusterType)
				origin.waitStreams([]string{"xds-relay/staging"})
				c.waitHolds(resource.ClusterType, "stg-a")
			}
			nodes := origin.fullNodes()
			if len(nodes) != 1 {
				t.Fatalf("origin saw %d streams, want 1", len(nodes))
			}
			// client_features are the relay's own, on every upstream node.
			if diff := cmp.Diff(want, nodes[0], protocmp.Transform(), protocmp.IgnoreFields(&corev3.Node{}, "client_features")); diff != "" {
				t.Errorf("node the origin saw (-want +got):\n%s", diff)
			}
		})
	}
}
