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

// collect gathers the pools from the rules: the values the rules name, the
// same common values for every pool, then near misses of all of them.
func collect(c *legacykey.Config, r *rand.Rand) pools {
	col := &collector{r: r, sets: map[string]map[string]bool{}}
	for i := range c.Fragments {
		for j := range c.Fragments[i].Rules {
			col.match(c.Fragments[i].Rules[j].Match)
			col.result(c.Fragments[i].Rules[j].Result)
		}
	}
	col.addCommon()
	col.addNearMisses()
	return col.pools()
}

// poolSets are the pools of strings that get common values and near misses.
var poolSets = []string{"ids", "clusters", "regions", "zones", "subs", "meta", "names"}

// collector is the state of collect: a set of values per pool and the
// distinct metadata paths, in the order they were met.
type collector struct {
	r     *rand.Rand
	sets  map[string]map[string]bool
	paths [][]string
}

func (c *collector) add(set, v string) {
	if c.sets[set] == nil {
		c.sets[set] = map[string]bool{}
	}
	c.sets[set][v] = true
}

// addString adds a string match's literal, or strings its regex matches.
func (c *collector) addString(set string, m *legacykey.StringMatch) {
	if m == nil {
		return
	}
	if m.ExactMatch != nil {
		c.add(set, *m.ExactMatch)
	}
	if m.RegexMatch != nil {
		for _, s := range samples(*m.RegexMatch, c.r) {
			c.add(set, s)
		}
	}
}

// addPath adds a metadata path once, and its first key alone: a value
// where a struct was expected.
func (c *collector) addPath(segs []legacykey.PathSegment) {
	keys := pathKeys(segs)
	for _, p := range c.paths {
		if strings.Join(p, "\x00") == strings.Join(keys, "\x00") {
			return
		}
	}
	c.paths = append(c.paths, keys)
	if len(keys) > 1 {
		c.paths = append(c.paths, keys[:1]) // a value where a struct was expected
	}
}

// match adds the values a match predicate names, through its and, or and not.
func (c *collector) match(m *legacykey.MatchPredicate) {
	if m == nil {
		return
	}
	if m.RequestTypeMatch != nil {
		for _, t := range m.RequestTypeMatch.Types {
			c.add("types", t)
		}
	}
	for _, set := range []*legacykey.MatchSet{m.AndMatch, m.OrMatch} {
		if set != nil {
			for i := range set.Rules {
				c.match(&set.Rules[i])
			}
		}
	}
	c.match(m.NotMatch)
	if n := m.RequestNodeMatch; n != nil {
		c.nodeMatch(n)
	}
}

// nodeMatch adds the values a node match names.
func (c *collector) nodeMatch(n *legacykey.RequestNodeMatch) {
	c.addString("ids", n.IDMatch)
	c.addString("clusters", n.ClusterMatch)
	if l := n.LocalityMatch; l != nil {
		c.addString("regions", l.Region)
		c.addString("zones", l.Zone)
		c.addString("subs", l.SubZone)
	}
	if md := n.NodeMetadataMatch; md != nil {
		c.addPath(md.Path)
		c.addString("meta", md.Match.StringMatch)
	}
}

// addAction adds strings a regex action's pattern matches.
func (c *collector) addAction(set string, a *legacykey.ResultAction) {
	if a != nil && a.RegexAction != nil {
		for _, s := range samples(a.RegexAction.Pattern, c.r) {
			c.add(set, s)
		}
	}
}

// result adds the values a result predicate's actions match, through its and.
func (c *collector) result(res *legacykey.ResultPredicate) {
	if res == nil {
		return
	}
	if res.AndResult != nil {
		for i := range res.AndResult.ResultPredicates {
			c.result(&res.AndResult.ResultPredicates[i])
		}
	}
	if f := res.ResourceNamesFragment; f != nil {
		c.addAction("names", f.Action)
	}
	if f := res.RequestNodeFragment; f != nil {
		c.nodeFragment(f)
	}
}

// nodeFragment adds the values a node fragment's actions match.
func (c *collector) nodeFragment(f *legacykey.RequestNodeFragment) {
	c.addAction("ids", f.IDAction)
	c.addAction("clusters", f.ClusterAction)
	if l := f.LocalityAction; l != nil {
		c.addAction("regions", l.RegionAction)
		c.addAction("zones", l.ZoneAction)
		c.addAction("subs", l.SubzoneAction)
	}
	if md := f.NodeMetadataAction; md != nil {
		c.addPath(md.Path)
		c.addAction("meta", md.Action)
	}
}

// addCommon adds every resource type, and values every string pool gets.
func (c *collector) addCommon() {
	for _, t := range []string{resourcev3.ListenerType, resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.RouteType, "type.googleapis.com/example.v1.Custom"} {
		c.add("types", t)
	}
	common := []string{"", "a", "a_b", "a|b", "payments-prod", "payments-staging-2", "canary", "x-y-z", "-"}
	for _, s := range poolSets {
		for _, v := range common {
			c.add(s, v)
		}
	}
}

// addNearMisses adds near misses of every value: a prefix, a suffix added,
// a char dropped.
func (c *collector) addNearMisses() {
	for _, s := range poolSets {
		values := make([]string, 0, len(c.sets[s]))
		for v := range c.sets[s] {
			values = append(values, v)
		}
		for _, v := range values { // not the map: it grows in the loop
			if v == "" {
				continue
			}
			c.add(s, v+"-1")
			c.add(s, "x"+v)
			c.add(s, v[:len(v)-1])
			c.add(s, strings.ToUpper(v))
		}
	}
}

// list is a pool's values, sorted.
func (c *collector) list(set string) []string {
	out := make([]string, 0, len(c.sets[set]))
	for v := range c.sets[set] {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func (c *collector) pools() pools {
	names := c.list("names")
	// A relay never sees a request for the name "": that is the wildcard.
	if len(names) > 0 && names[0] == "" {
		names = names[1:]
	}
	return pools{
		types: c.list("types"), names: names,
		ids: c.list("ids"), clusters: c.list("clusters"), regions: c.list("regions"), zones: c.list("zones"), subs: c.list("subs"),
		metaPaths: c.paths, metaStrings: c.list("meta"),
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
