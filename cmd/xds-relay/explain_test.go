package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// noDefaultConfig has one rule and no default, and its only authority
// refuses plain names: other clusters match nothing.
const noDefaultConfig = `
authorities:
  - name: mesh
    origins: ["127.0.0.1:19000"]
    plain_names: false
aggregation:
  rules:
    - name: frontend
      match: {node: {cluster: {exact: frontend}}}
      result: {authority: mesh, group: [{literal: fe}]}
`

// plainConfig is the smallest config: one authority, no rules. Its plain
// names are served by the built-in rule.
const plainConfig = `
authorities:
  - name: mesh
    origins: ["127.0.0.1:19000"]
`

// badRulesConfig has a regex that does not compile.
const badRulesConfig = `
authorities:
  - name: mesh
    origins: ["127.0.0.1:19000"]
aggregation:
  rules:
    - name: broken
      match: {node: {cluster: {regex: "front("}}}
      result: {authority: mesh, group: [{literal: fe}]}
`

// refuseConfig refuses the legacy-* clusters, groups by a typed metadata
// bool and rewrites the cluster.
const refuseConfig = `
authorities:
  - name: mesh
    origins: ["127.0.0.1:19000"]
    plain_names: false
aggregation:
  rules:
    - name: no-legacy
      match: {node: {cluster: {prefix: legacy-}}}
      result: {refuse: {reason: "served by the old relay"}}
    - name: mesh-flag
      match: {node: {metadata: [{keys: [istio.io], bool: true}]}}
      result:
        authority: mesh
        group:
          - literal: "mesh/"
          - rewrite: {from: node.cluster, regex: "-(prod|staging)$", replace: ""}
            refuse_empty: true
        node: {id: relay-mesh, metadata: {mesh: true}}
`

func writeExplainConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExplain(t *testing.T) {
	example := "../../config/example.yaml"
	noDefault := writeExplainConfig(t, noDefaultConfig)
	badRules := writeExplainConfig(t, badRulesConfig)
	plain := writeExplainConfig(t, plainConfig)
	refuse := writeExplainConfig(t, refuseConfig)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string   // exact, when set
		wantStderr []string // substrings
	}{
		{
			name:     "eds per service, env and zone",
			args:     []string{"--config", example, "--type", "eds", "--name", "backend", "--node-id", "envoy-7", "--node-cluster", "payments-prod", "--node-zone", "eu-west-1a"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, name "backend" (named)
node:          id "envoy-7", cluster "payments-prod", locality ""/"eu-west-1a"/""
rule:          eds-cds-per-cluster (aggregation.rules[1])
authority:     legacy
group key:     service=payments/env=prod/zone=eu-west-1a
upstream node: id "xds-relay", cluster "payments/prod", locality ""/"eu-west-1a"/"" (from the group key alone; id the relay's unless the key uses it)
`,
		},
		{
			name:     "cds wildcard written as star, full type url",
			args:     []string{"--config", example, "--type", "type.googleapis.com/envoy.config.cluster.v3.Cluster", "--name", "*", "--node-cluster", "orders-staging", "--node-zone", "z"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "" (wildcard)
node:          id "", cluster "orders-staging", locality ""/"z"/""
rule:          eds-cds-per-cluster (aggregation.rules[1])
authority:     legacy
group key:     service=orders/env=staging/zone=z
upstream node: id "xds-relay", cluster "orders/staging", locality ""/"z"/"" (from the group key alone; id the relay's unless the key uses it)
`,
		},
		{
			name:     "canary by metadata, node set by the rule",
			args:     []string{"--config", example, "--type", "CDS", "--node-id", "envoy-9", "--node-cluster", "payments-prod", "--node-metadata", "deploy.track=canary", "--node-metadata", "team=payments"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "" (wildcard)
node:          id "envoy-9", cluster "payments-prod", metadata deploy.track="canary" team="payments"
rule:          canary (aggregation.rules[0])
authority:     legacy
group key:     canary/payments-prod
upstream node: id "relay-canary", cluster "canary" (set by the rule)
`,
		},
		{
			name:     "built-in rule of the authority marked plain_names",
			args:     []string{"--config", example, "--type", "lds", "--node-cluster", "payments-prod"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.listener.v3.Listener, name "" (wildcard)
node:          id "", cluster "payments-prod"
rule:          plain-names (built in: authorities[1] serves the plain names no rule matches)
authority:     legacy
group key:     cluster=payments-prod
upstream node: id "xds-relay", cluster "payments-prod" (from the group key alone; id the relay's unless the key uses it)
`,
		},
		{
			name:     "refused by a rule",
			args:     []string{"--config", refuse, "--type", "cds", "--node-id", "old-1", "--node-cluster", "legacy-payments"},
			wantCode: exitFail,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "" (wildcard)
node:          id "old-1", cluster "legacy-payments"
rule:          no-legacy (aggregation.rules[0])
refused:       served by the old relay (the client's stream ends with FAILED_PRECONDITION)
`,
		},
		{
			name:     "typed metadata: the bool true, a rewrite, fixed upstream metadata",
			args:     []string{"--config", refuse, "--type", "cds", "--node-id", "e-1", "--node-cluster", "payments-prod", "--node-metadata-json", `{"istio.io": true}`, "--node-metadata", "team=pay"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "" (wildcard)
node:          id "e-1", cluster "payments-prod", metadata ["istio.io"]=true team="pay"
rule:          mesh-flag (aggregation.rules[1])
authority:     mesh
group key:     mesh/payments
upstream node: id "relay-mesh", cluster "", metadata mesh=true (set by the rule)
`,
		},
		{
			name:     "typed metadata: the string true is not the bool",
			args:     []string{"--config", refuse, "--type", "cds", "--node-cluster", "payments-prod", "--node-metadata-json", `{"istio.io": "true"}`},
			wantCode: exitFail,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "" (wildcard)
node:          id "", cluster "payments-prod", metadata ["istio.io"]="true"
no rule matches: the relay refuses this request (rules tried: 2; none is default, no authority serves plain names)
`,
		},
		{
			name:     "refuse_empty",
			args:     []string{"--config", refuse, "--type", "cds", "--node-cluster", "-prod", "--node-metadata-json", `{"istio.io": true}`},
			wantCode: exitFail,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "" (wildcard)
node:          id "", cluster "-prod", metadata ["istio.io"]=true
rule:          mesh-flag (aggregation.rules[1])
refused:       rules[1].result.group[1] is empty (refuse_empty) (the client's stream ends with FAILED_PRECONDITION)
`,
		},
		{
			name:       "bad typed metadata flag",
			args:       []string{"--config", refuse, "--type", "cds", "--node-cluster", "c", "--node-metadata-json", "a=tru"},
			wantCode:   exitUsage,
			wantStderr: []string{`"a=tru": not JSON`},
		},
		{
			name:     "no rule matches",
			args:     []string{"--config", noDefault, "--type", "eds", "--name", "backend", "--node-id", "b-1", "--node-cluster", "backend"},
			wantCode: exitFail,
			wantStdout: `request:       type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, name "backend" (named)
node:          id "b-1", cluster "backend"
no rule matches: the relay refuses this request (rules tried: 1; none is default, no authority serves plain names)
`,
		},
		{
			name:     "empty cluster is a value",
			args:     []string{"--config", noDefault, "--type", "eds", "--node-cluster", ""},
			wantCode: exitFail,
			wantStdout: `request:       type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, name "" (wildcard)
node:          id "", cluster ""
no rule matches: the relay refuses this request (rules tried: 1; none is default, no authority serves plain names)
`,
		},
		{
			name:     "plain names of the only authority, by the built-in rule",
			args:     []string{"--config", plain, "--type", "eds", "--name", "backend", "--node-id", "envoy-1", "--node-cluster", "payments"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, name "backend" (named)
node:          id "envoy-1", cluster "payments"
rule:          plain-names (built in: authorities[0] serves the plain names no rule matches)
authority:     mesh
group key:     cluster=payments
upstream node: id "xds-relay", cluster "payments" (from the group key alone; id the relay's unless the key uses it)
`,
		},
		{
			name:     "xdstp name: its authority and canonical key, no rule",
			args:     []string{"--config", example, "--type", "cds", "--name", "xdstp://auth.example/envoy.config.cluster.v3.Cluster/backend?zone=a&env=prod"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.cluster.v3.Cluster, name "xdstp://auth.example/envoy.config.cluster.v3.Cluster/backend?zone=a&env=prod" (xdstp)
rule:          none (an xdstp name is its own key; the node does not matter)
authority:     auth.example
cache key:     xdstp://auth.example/envoy.config.cluster.v3.Cluster/backend?env=prod&zone=a
upstream node: id "xds-relay", cluster "" (the relay's node, on the authority's one stream)
`,
		},
		{
			name:     "xdstp glob",
			args:     []string{"--config", example, "--type", "eds", "--name", "xdstp://auth.example/envoy.config.endpoint.v3.ClusterLoadAssignment/demo/*", "--node-cluster", "ignored"},
			wantCode: exitOK,
			wantStdout: `request:       type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, name "xdstp://auth.example/envoy.config.endpoint.v3.ClusterLoadAssignment/demo/*" (xdstp glob collection)
rule:          none (an xdstp name is its own key; the node does not matter)
authority:     auth.example
cache key:     xdstp://auth.example/envoy.config.endpoint.v3.ClusterLoadAssignment/demo/*
upstream node: id "xds-relay", cluster "" (the relay's node, on the authority's one stream)
`,
		},
		{
			name:       "xdstp name of another type",
			args:       []string{"--config", example, "--type", "lds", "--name", "xdstp://auth.example/envoy.config.cluster.v3.Cluster/backend"},
			wantCode:   exitFail,
			wantStderr: []string{`names type "envoy.config.cluster.v3.Cluster", requested as "type.googleapis.com/envoy.config.listener.v3.Listener"`},
		},
		{
			name:       "xdstp name of an unknown authority",
			args:       []string{"--config", example, "--type", "cds", "--name", "xdstp://elsewhere.example/envoy.config.cluster.v3.Cluster/backend"},
			wantCode:   exitFail,
			wantStderr: []string{`authority "elsewhere.example"`},
		},
		{
			name:       "invalid rules",
			args:       []string{"--config", badRules, "--type", "eds", "--node-cluster", "frontend"},
			wantCode:   exitFail,
			wantStderr: []string{"aggregation.rules[0].match.node.cluster.regex", "does not compile"},
		},
		{
			name:       "missing type",
			args:       []string{"--config", example, "--node-cluster", "c"},
			wantCode:   exitUsage,
			wantStderr: []string{"--type is required"},
		},
		{
			name:       "missing node cluster",
			args:       []string{"--config", example, "--type", "eds"},
			wantCode:   exitUsage,
			wantStderr: []string{"--node-cluster is required"},
		},
		{
			name:       "unknown type",
			args:       []string{"--config", example, "--type", "clusters", "--node-cluster", "c"},
			wantCode:   exitUsage,
			wantStderr: []string{`--type "clusters": want a type URL`},
		},
		{
			name:       "bad metadata flag",
			args:       []string{"--config", example, "--type", "eds", "--node-cluster", "c", "--node-metadata", "team"},
			wantCode:   exitUsage,
			wantStderr: []string{`"team": want path=value`},
		},
		{
			name:       "metadata path through a value",
			args:       []string{"--config", example, "--type", "eds", "--node-cluster", "c", "--node-metadata", "a=1", "--node-metadata", "a.b=2"},
			wantCode:   exitUsage,
			wantStderr: []string{`"a.b=2": a is a value, not a struct`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), append([]string{"explain"}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if tt.wantStdout != "" {
				if diff := cmp.Diff(tt.wantStdout, stdout.String()); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
			}
			for _, want := range tt.wantStderr {
				if !bytes.Contains(stderr.Bytes(), []byte(want)) {
					t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}
