package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/xdsname"
)

// explainTypes are the short names `explain --type` accepts besides full
// type URLs.
var explainTypes = map[string]string{
	"lds":  resourcev3.ListenerType,
	"rds":  resourcev3.RouteType,
	"srds": resourcev3.ScopedRouteType,
	"vhds": resourcev3.VirtualHostType,
	"cds":  resourcev3.ClusterType,
	"eds":  resourcev3.EndpointType,
	"sds":  resourcev3.SecretType,
	"ecds": resourcev3.ExtensionConfigType,
	"rtds": resourcev3.RuntimeType,
}

// metadataFlags collects repeated --node-metadata path=value flags.
type metadataFlags []string

func (m *metadataFlags) String() string { return strings.Join(*m, ",") }

func (m *metadataFlags) Set(v string) error {
	if path, _, ok := strings.Cut(v, "="); !ok || path == "" {
		return fmt.Errorf("%q: want path=value, e.g. team.name=payments", v)
	}
	*m = append(*m, v)
	return nil
}

// typedMetadataFlags collects repeated --node-metadata-json flags:
// path=JSON, or a JSON object.
type typedMetadataFlags []string

func (m *typedMetadataFlags) String() string { return strings.Join(*m, ",") }

func (m *typedMetadataFlags) Set(v string) error {
	if strings.HasPrefix(strings.TrimSpace(v), "{") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(v), &obj); err != nil {
			return fmt.Errorf("%q: not a JSON object: %v", v, err)
		}
	} else if path, _, ok := strings.Cut(v, "="); !ok || path == "" {
		return fmt.Errorf("%q: want path=JSON, e.g. istio=true, or a JSON object", v)
	}
	*m = append(*m, v)
	return nil
}

// cmdExplain implements `xds-relay explain`: it prints which aggregation
// rule a request matches (the built-in plain-names rule included) and the
// authority, group key and upstream node it resolves to, or "no rule
// matches" (exit 1). An xdstp name needs no rule: it prints its authority
// and canonical key, and a name the relay would refuse (its type is not
// --type, its authority is not configured) is an error.
func cmdExplain(_ context.Context, args []string, stdout, stderr io.Writer) error {
	q, err := parseExplainFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := config.Load(q.cfgPath)
	if err != nil {
		return err
	}
	if xdsname.IsXDSTP(q.name) {
		return explainXDSTP(stdout, cfg, q.typeURL, q.name)
	}
	return explainPlain(stdout, cfg, q)
}

// explainQuery is what `xds-relay explain` was asked.
type explainQuery struct {
	cfgPath string
	typeURL string
	name    string
	node    *corev3.Node
}

// parseExplainFlags defines explain's flags, parses args, checks the
// required ones and builds the request's type URL and node.
func parseExplainFlags(args []string, stderr io.Writer) (*explainQuery, error) {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	var (
		cfgPath  = fs.String("config", "", "config `file` (required)")
		typ      = fs.String("type", "", "resource type: a type URL, or one of "+typeAliases()+" (required)")
		name     = fs.String("name", "", "resource name; empty or \"*\" for a wildcard subscription")
		nodeID   = fs.String("node-id", "", "node.id")
		cluster  = fs.String("node-cluster", "", "node.cluster (required; may be \"\")")
		region   = fs.String("node-region", "", "node.locality.region")
		zone     = fs.String("node-zone", "", "node.locality.zone")
		subZone  = fs.String("node-sub-zone", "", "node.locality.sub_zone")
		metadata metadataFlags
	)
	var typed typedMetadataFlags
	fs.Var(&metadata, "node-metadata", "node.metadata string value as `path=value` (dot-separated path); repeatable")
	fs.Var(&typed, "node-metadata-json", "node.metadata value of any type as `path=JSON` (true, 3, \"true\", null, {...}), or a JSON object of top-level keys (which may contain dots); repeatable")
	if err := parseFlags(fs, args, stderr); err != nil {
		return nil, err
	}
	if err := requireExplainFlags(fs, *name); err != nil {
		return nil, err
	}
	typeURL, ok := explainTypes[strings.ToLower(*typ)]
	if !ok {
		typeURL = *typ
	}
	if !strings.HasPrefix(typeURL, resourcev3.APITypePrefix) {
		return nil, usageError{fmt.Sprintf("--type %q: want a type URL (%s...) or one of %s", *typ, resourcev3.APITypePrefix, typeAliases())}
	}

	node := &corev3.Node{Id: *nodeID, Cluster: *cluster}
	if *region != "" || *zone != "" || *subZone != "" {
		node.Locality = &corev3.Locality{Region: *region, Zone: *zone, SubZone: *subZone}
	}
	if len(metadata) > 0 || len(typed) > 0 {
		md, err := aggregation.NodeMetadata(metadata, typed)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--node-metadata %v", err)}
		}
		node.Metadata = md
	}
	return &explainQuery{cfgPath: *cfgPath, typeURL: typeURL, name: *name, node: node}, nil
}

// requireExplainFlags checks that the flags explain needs for name were
// set: --node-cluster too for a plain name, which is grouped by node.
func requireExplainFlags(fs *flag.FlagSet, name string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	required := []string{"config", "type"}
	if !xdsname.IsXDSTP(name) {
		required = append(required, "node-cluster") // plain names are grouped by node
	}
	for _, f := range required {
		if !set[f] {
			return usageError{fmt.Sprintf("--%s is required", f)}
		}
	}
	return nil
}

// explainPlain explains a plain name: the rule it matches, or why none
// does, and the authority, group key and upstream node it resolves to.
func explainPlain(stdout io.Writer, cfg *config.Config, q *explainQuery) error {
	allRules := cfg.AggregationRules()
	name := q.name
	if name == "*" {
		name = "" // the wildcard, as the downstream resolves it
	}
	ex, err := aggregation.Explain(allRules, aggregation.Request{TypeURL: q.typeURL, Name: name, Node: q.node}, cfg.Node.ID)
	if err != nil {
		return fmt.Errorf("%s: %w", q.cfgPath, err)
	}
	fmt.Fprintf(stdout, "request:       type %s, name %q (%s)\n", q.typeURL, name, nameKind(name))
	fmt.Fprintf(stdout, "node:          %s\n", describeNode(q.node))
	switch {
	case ex.Refused != "":
		fmt.Fprintf(stdout, "rule:          %s (aggregation.rules[%d])\n", ex.Rule, ex.Index)
		fmt.Fprintf(stdout, "refused:       %s (the client's stream ends with FAILED_PRECONDITION)\n", ex.Refused)
		return errReported
	case ex.Index < 0:
		fmt.Fprintf(stdout, "no rule matches: the relay refuses this request (rules tried: %d; none is default, no authority serves plain names)\n", len(allRules))
		return errReported
	}
	if i := cfg.PlainNamesAuthority(); i >= 0 && ex.Rule == aggregation.PlainNamesRuleName {
		fmt.Fprintf(stdout, "rule:          %s (built in: authorities[%d] serves the plain names no rule matches)\n", ex.Rule, i)
	} else {
		fmt.Fprintf(stdout, "rule:          %s (aggregation.rules[%d])\n", ex.Rule, ex.Index)
	}
	fmt.Fprintf(stdout, "authority:     %s\n", ex.Result.Authority)
	fmt.Fprintf(stdout, "group key:     %s\n", ex.Result.Group)
	if ex.NodeFromRule {
		fmt.Fprintf(stdout, "upstream node: %s (set by the rule)\n", describeNode(ex.UpstreamNode))
	} else {
		fmt.Fprintf(stdout, "upstream node: %s (from the group key alone; id the relay's unless the key uses it)\n", describeNode(ex.UpstreamNode))
	}
	return nil
}

// explainXDSTP explains an xdstp name: it needs no rule, its authority is
// its own and its key its canonical form, exactly as the relay resolves it
// (the same resolver); a name the relay would refuse is an error.
func explainXDSTP(stdout io.Writer, cfg *config.Config, typeURL, name string) error {
	res, err := downstream.NewResolver(cfg.AuthorityNames(), nil).CarryTypes(cfg.AuthorityTypes()).Resolve(typeURL, name, nil)
	if err != nil {
		return fmt.Errorf("--name: %w", err)
	}
	kind := "xdstp"
	if res.Collection {
		kind = "xdstp glob collection"
	}
	fmt.Fprintf(stdout, "request:       type %s, name %q (%s)\n", typeURL, name, kind)
	fmt.Fprintf(stdout, "rule:          none (an xdstp name is its own key; the node does not matter)\n")
	fmt.Fprintf(stdout, "authority:     %s\n", res.Key.Link.Authority)
	fmt.Fprintf(stdout, "cache key:     %s\n", res.Key.Name)
	fmt.Fprintf(stdout, "upstream node: %s (the relay's node, on the authority's one stream)\n", describeNode(&corev3.Node{Id: cfg.Node.ID, Cluster: cfg.Node.Cluster}))
	return nil
}

func typeAliases() string {
	names := make([]string, 0, len(explainTypes))
	for n := range explainTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func nameKind(name string) string {
	if name == "" {
		return "wildcard"
	}
	return "named"
}

// describeNode prints the node fields aggregation rules can see.
func describeNode(n *corev3.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id %q, cluster %q", n.GetId(), n.GetCluster())
	if l := n.GetLocality(); l != nil {
		fmt.Fprintf(&b, ", locality %q/%q/%q", l.GetRegion(), l.GetZone(), l.GetSubZone())
	}
	if md := n.GetMetadata(); len(md.GetFields()) > 0 {
		b.WriteString(", metadata")
		writeMetadata(&b, "", md)
	}
	return b.String()
}

// writeMetadata writes " path=value" for every scalar in s, sorted by key.
func writeMetadata(b *strings.Builder, prefix string, s *structpb.Struct) {
	keys := make([]string, 0, len(s.GetFields()))
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := s.GetFields()[k]
		if sub := v.GetStructValue(); sub != nil && len(sub.GetFields()) > 0 {
			key := k
			if strings.Contains(k, ".") {
				key = "[" + strconv.Quote(k) + "]"
			}
			writeMetadata(b, prefix+key+".", sub)
			continue
		}
		// A string quoted; any other type as JSON (true, 3, null, {}).
		text := fmt.Sprintf("%q", v.GetStringValue())
		if _, ok := v.GetKind().(*structpb.Value_StringValue); !ok {
			js, _ := protojson.Marshal(v)
			text = string(js)
		}
		if strings.Contains(k, ".") {
			k = "[" + strconv.Quote(k) + "]" // a key with a dot, not a path
		}
		fmt.Fprintf(b, " %s%s=%s", prefix, k, text)
	}
}
