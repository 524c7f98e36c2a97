package migrate

import (
	"math/rand/v2"
	"regexp/syntax"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// Request is one generated request: a type, at most one resource name
// (none: a wildcard) and a node.
type Request struct {
	TypeURL string
	Name    string // "" for a wildcard
	Node    *corev3.Node
}

// pools are the values requests are drawn from: the rules' own literals,
// strings their regexes match, and variations of both.
type pools struct {
	types, names                        []string
	ids, clusters, regions, zones, subs []string
	metaPaths                           [][]string
	metaStrings                         []string
}

// Generate returns n requests drawn deterministically (seeded) from the
// literals and regexes of c, plus variations: empty values, near misses,
// "_" and "|" (the earlier relay's separators), every metadata type.
func Generate(c *legacykey.Config, n int, seed uint64) []Request {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := collect(c, r)
	out := make([]Request, 0, n)
	for len(out) < n {
		req := Request{TypeURL: pick(r, p.types)}
		if r.IntN(4) > 0 {
			req.Name = pick(r, p.names)
		}
		node := &corev3.Node{Id: pick(r, p.ids), Cluster: pick(r, p.clusters)}
		if r.IntN(4) > 0 {
			node.Locality = &corev3.Locality{Region: pick(r, p.regions), Zone: pick(r, p.zones), SubZone: pick(r, p.subs)}
		}
		switch r.IntN(6) {
		case 0: // no metadata
		case 1:
			node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		default:
			node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			for _, path := range p.metaPaths {
				if r.IntN(3) > 0 {
					setPath(node.Metadata, path, metaValue(r, p))
				}
			}
			if r.IntN(8) == 0 {
				node.Metadata.Fields["unrelated"] = structpb.NewStringValue("x")
			}
		}
		req.Node = node
		out = append(out, req)
	}
	return out
}

func pick(r *rand.Rand, list []string) string { return list[r.IntN(len(list))] }

// metaValue is a metadata value of any kind.
func metaValue(r *rand.Rand, p pools) *structpb.Value {
	switch r.IntN(8) {
	case 0:
		return structpb.NewBoolValue(true)
	case 1:
		return structpb.NewBoolValue(false)
	case 2:
		return structpb.NewNumberValue(float64(r.IntN(3)))
	case 3:
		return structpb.NewNullValue()
	case 4:
		return structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("v")}})
	}
	return structpb.NewStringValue(pick(r, p.metaStrings))
}

// setPath sets v at path in s, making structs on the way (a value already
// on the way that is not a struct stays: the path is then absent).
func setPath(s *structpb.Struct, path []string, v *structpb.Value) {
	for _, k := range path[:len(path)-1] {
		next := s.Fields[k]
		if next == nil {
			next = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{}})
			s.Fields[k] = next
		}
		if next.GetStructValue() == nil {
			return
		}
		s = next.GetStructValue()
	}
	s.Fields[path[len(path)-1]] = v
}

// collect gathers the pools from the rules.
func collect(c *legacykey.Config, r *rand.Rand) pools {
	sets := map[string]map[string]bool{}
	add := func(set, v string) {
		if sets[set] == nil {
			sets[set] = map[string]bool{}
		}
		sets[set][v] = true
	}
	addString := func(set string, m *legacykey.StringMatch) {
		if m == nil {
			return
		}
		if m.ExactMatch != nil {
			add(set, *m.ExactMatch)
		}
		if m.RegexMatch != nil {
			for _, s := range samples(*m.RegexMatch, r) {
				add(set, s)
			}
		}
	}
	var paths [][]string
	addPath := func(segs []legacykey.PathSegment) {
		keys := pathKeys(segs)
		for _, p := range paths {
			if strings.Join(p, "\x00") == strings.Join(keys, "\x00") {
				return
			}
		}
		paths = append(paths, keys)
		if len(keys) > 1 {
			paths = append(paths, keys[:1]) // a value where a struct was expected
		}
	}
	var match func(m *legacykey.MatchPredicate)
	match = func(m *legacykey.MatchPredicate) {
		if m == nil {
			return
		}
		if m.RequestTypeMatch != nil {
			for _, t := range m.RequestTypeMatch.Types {
				add("types", t)
			}
		}
		for _, set := range []*legacykey.MatchSet{m.AndMatch, m.OrMatch} {
			if set != nil {
				for i := range set.Rules {
					match(&set.Rules[i])
				}
			}
		}
		match(m.NotMatch)
		if n := m.RequestNodeMatch; n != nil {
			addString("ids", n.IDMatch)
			addString("clusters", n.ClusterMatch)
			if l := n.LocalityMatch; l != nil {
				addString("regions", l.Region)
				addString("zones", l.Zone)
				addString("subs", l.SubZone)
			}
			if md := n.NodeMetadataMatch; md != nil {
				addPath(md.Path)
				addString("meta", md.Match.StringMatch)
			}
		}
	}
	addAction := func(set string, a *legacykey.ResultAction) {
		if a != nil && a.RegexAction != nil {
			for _, s := range samples(a.RegexAction.Pattern, r) {
				add(set, s)
			}
		}
	}
	var result func(res *legacykey.ResultPredicate)
	result = func(res *legacykey.ResultPredicate) {
		if res == nil {
			return
		}
		if res.AndResult != nil {
			for i := range res.AndResult.ResultPredicates {
				result(&res.AndResult.ResultPredicates[i])
			}
		}
		if f := res.ResourceNamesFragment; f != nil {
			addAction("names", f.Action)
		}
		if f := res.RequestNodeFragment; f != nil {
			addAction("ids", f.IDAction)
			addAction("clusters", f.ClusterAction)
			if l := f.LocalityAction; l != nil {
				addAction("regions", l.RegionAction)
				addAction("zones", l.ZoneAction)
				addAction("subs", l.SubzoneAction)
			}
			if md := f.NodeMetadataAction; md != nil {
				addPath(md.Path)
				addAction("meta", md.Action)
			}
		}
	}
	for i := range c.Fragments {
		for j := range c.Fragments[i].Rules {
			match(c.Fragments[i].Rules[j].Match)
			result(c.Fragments[i].Rules[j].Result)
		}
	}
	for _, t := range []string{resourcev3.ListenerType, resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.RouteType, "type.googleapis.com/example.v1.Custom"} {
		add("types", t)
	}
	common := []string{"", "a", "a_b", "a|b", "payments-prod", "payments-staging-2", "canary", "x-y-z", "-"}
	for _, s := range []string{"ids", "clusters", "regions", "zones", "subs", "meta", "names"} {
		for _, v := range common {
			add(s, v)
		}
	}
	// Near misses of every value: a prefix, a suffix added, a char dropped.
	for _, s := range []string{"ids", "clusters", "regions", "zones", "subs", "meta", "names"} {
		values := make([]string, 0, len(sets[s]))
		for v := range sets[s] {
			values = append(values, v)
		}
		for _, v := range values { // not the map: it grows in the loop
			if v == "" {
				continue
			}
			add(s, v+"-1")
			add(s, "x"+v)
			add(s, v[:len(v)-1])
			add(s, strings.ToUpper(v))
		}
	}
	list := func(set string) []string {
		out := make([]string, 0, len(sets[set]))
		for v := range sets[set] {
			out = append(out, v)
		}
		sort.Strings(out)
		return out
	}
	names := list("names")
	// A relay never sees a request for the name "": that is the wildcard.
	if len(names) > 0 && names[0] == "" {
		names = names[1:]
	}
	return pools{
		types: list("types"), names: names,
		ids: list("ids"), clusters: list("clusters"), regions: list("regions"), zones: list("zones"), subs: list("subs"),
		metaPaths: paths, metaStrings: list("meta"),
	}
}

// samples returns a few strings the regex matches somewhere (and the
// pieces of its literals); none for a regex that does not compile.
func samples(expr string, r *rand.Rand) []string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	var out []string
	for i := 0; i < 6; i++ {
		var b strings.Builder
		sample(re, r, &b)
		out = append(out, b.String())
	}
	return out
}

func sample(re *syntax.Regexp, r *rand.Rand, b *strings.Builder) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return
		}
		k := r.IntN(len(re.Rune)/2) * 2
		lo, hi := re.Rune[k], re.Rune[k+1]
		if hi > lo+25 {
			hi = lo + 25
		}
		b.WriteRune(lo + rune(r.IntN(int(hi-lo)+1)))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte("ab-_.Z0"[r.IntN(7)])
	case syntax.OpCapture:
		sample(re.Sub[0], r, b)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 2
		switch re.Op {
		case syntax.OpPlus:
			lo, hi = 1, 3
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Min+1
			if re.Max >= 0 && hi > re.Max {
				hi = re.Max
			}
		}
		for n := lo + r.IntN(hi-lo+1); n > 0; n-- {
			sample(re.Sub[0], r, b)
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			sample(s, r, b)
		}
	case syntax.OpAlternate:
		sample(re.Sub[r.IntN(len(re.Sub))], r, b)
	}
}
