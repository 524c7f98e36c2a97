package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-relay/xds-relay/config"
)

// TestAggregationFetchUsesRuleNode: a REST poll for a legacy name that the
// canary rule groups is fetched upstream on the group's stream, presenting
// the node the rule sets (relay-canary/canary), not the polling client's
// own (rest-canary/frontend). The origin answers per node cluster and only
// the canary snapshot holds canary-a, so the wrong node gets no answer.
func TestAggregationFetchUsesRuleNode(t *testing.T) {
	origin := newClusterSnapshotOrigin(t)
	origin.setClusterSnapshot("frontend", "f1", []string{"fe-a"}, []string{"fe-a"})
	origin.setClusterSnapshot("canary", "c1", []string{"canary-a"}, []string{"canary-a"})
	r := startRelay(t, func(c *config.Config) {
		c.Aggregation.Rules = decodeAggRules(t, aggRules)
		c.RESTListen = "127.0.0.1:0"
	}, origin.addr)

	body := `{"node": {"id": "rest-canary", "cluster": "frontend", "metadata": {"deploy": {"track": "canary"}}},
	          "resource_names": ["canary-a"]}`
	resp, err := http.Post("http://"+r.RESTAddr()+"/v3/discovery:clusters", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	dr := &discoveryv3.DiscoveryResponse{}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("REST poll: HTTP %d %s", resp.StatusCode, raw)
	}
	if err := protojson.Unmarshal(raw, dr); err != nil {
		t.Fatalf("REST poll: %v in %s", err, raw)
	}
	var got []string
	for _, a := range dr.GetResources() {
		c := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(c); err != nil {
			t.Fatalf("REST poll: resource %v: %v", a.GetTypeUrl(), err)
		}
		got = append(got, c.GetName())
	}
	if len(got) != 1 || got[0] != "canary-a" {
		t.Fatalf("REST poll got clusters %v, want [canary-a]", got)
	}
	origin.waitStreams([]string{"relay-canary/canary"})
}
