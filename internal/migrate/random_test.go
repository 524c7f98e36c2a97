package migrate

import (
	"errors"
	"math/rand/v2"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// randomRules builds an earlier-relay rules file from a small vocabulary
// of every predicate and result, so that random files meet each other's
// values.
type randomRules struct{ r *rand.Rand }

var randomTypes = []string{
	"type.googleapis.com/envoy.config.listener.v3.Listener",
	"type.googleapis.com/envoy.config.cluster.v3.Cluster",
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
}

func (g randomRules) pick(list ...string) string { return list[g.r.IntN(len(list))] }

func (g randomRules) str(list ...string) *string { s := g.pick(list...); return &s }

func (g randomRules) stringMatch() *legacykey.StringMatch {
	if g.r.IntN(2) == 0 {
		return &legacykey.StringMatch{ExactMatch: g.str("a", "canary", "payments-prod", "")}
	}
	return &legacykey.StringMatch{RegexMatch: g.str("^a", "prod$", "-", "^$", ".*", "a|b", "(")}
}

func (g randomRules) path() []legacykey.PathSegment {
	switch g.r.IntN(3) {
	case 0:
		return []legacykey.PathSegment{{Key: "a"}}
	case 1:
		return []legacykey.PathSegment{{Key: "a"}, {Key: "b"}}
	}
	return []legacykey.PathSegment{{Key: "x.y"}}
}

func (g randomRules) match(depth int) *legacykey.MatchPredicate {
	n := 6
	if depth > 0 {
		n = 9
	}
	switch g.r.IntN(n) {
	case 0:
		t := true
		return &legacykey.MatchPredicate{AnyMatch: &t}
	case 1:
		return &legacykey.MatchPredicate{RequestTypeMatch: &legacykey.RequestTypeMatch{Types: []string{g.pick(randomTypes...), g.pick(randomTypes...)}}}
	case 2:
		return &legacykey.MatchPredicate{RequestNodeMatch: &legacykey.RequestNodeMatch{IDMatch: g.stringMatch()}}
	case 3:
		return &legacykey.MatchPredicate{RequestNodeMatch: &legacykey.RequestNodeMatch{ClusterMatch: g.stringMatch()}}
	case 4:
		l := &legacykey.LocalityMatch{Region: g.stringMatch()}
		if g.r.IntN(2) == 0 {
			l.Zone = g.stringMatch()
		}
		return &legacykey.MatchPredicate{RequestNodeMatch: &legacykey.RequestNodeMatch{LocalityMatch: l}}
	case 5:
		m := &legacykey.StructValueMatch{StringMatch: g.stringMatch()}
		if g.r.IntN(2) == 0 {
			m = &legacykey.StructValueMatch{BoolMatch: &legacykey.BoolMatch{ValueMatch: g.r.IntN(2) == 0}}
		}
		return &legacykey.MatchPredicate{RequestNodeMatch: &legacykey.RequestNodeMatch{NodeMetadataMatch: &legacykey.NodeMetadataMatch{Path: g.path(), Match: m}}}
	case 6:
		return &legacykey.MatchPredicate{AndMatch: &legacykey.MatchSet{Rules: []legacykey.MatchPredicate{*g.match(depth - 1), *g.match(depth - 1)}}}
	case 7:
		return &legacykey.MatchPredicate{OrMatch: &legacykey.MatchSet{Rules: []legacykey.MatchPredicate{*g.match(depth - 1), *g.match(depth - 1)}}}
	}
	return &legacykey.MatchPredicate{NotMatch: g.match(depth - 1)}
}

func (g randomRules) action() *legacykey.ResultAction {
	if g.r.IntN(2) == 0 {
		t := true
		return &legacykey.ResultAction{Exact: &t}
	}
	return &legacykey.ResultAction{RegexAction: &legacykey.RegexAction{
		Pattern: g.pick("^(.*)-.*$", "a", "^", ".*", "[z"),
		Replace: g.pick("$1", "", "x", "${1}y", "$1_z"),
	}}
}

func (g randomRules) value() legacykey.ResultPredicate {
	switch g.r.IntN(5) {
	case 0:
		return legacykey.ResultPredicate{RequestNodeFragment: &legacykey.RequestNodeFragment{IDAction: g.action()}}
	case 1:
		return legacykey.ResultPredicate{RequestNodeFragment: &legacykey.RequestNodeFragment{ClusterAction: g.action()}}
	case 2:
		return legacykey.ResultPredicate{RequestNodeFragment: &legacykey.RequestNodeFragment{LocalityAction: &legacykey.LocalityResultAction{RegionAction: g.action(), ZoneAction: g.action()}}}
	case 3:
		return legacykey.ResultPredicate{RequestNodeFragment: &legacykey.RequestNodeFragment{NodeMetadataAction: &legacykey.NodeMetadataAction{Path: g.path(), Action: g.action()}}}
	}
	return legacykey.ResultPredicate{ResourceNamesFragment: &legacykey.ResourceNamesFragment{Action: g.action()}}
}

func (g randomRules) result() *legacykey.ResultPredicate {
	switch g.r.IntN(3) {
	case 0:
		return &legacykey.ResultPredicate{StringFragment: g.str("s", "", "a_b")}
	case 1:
		v := g.value()
		return &v
	}
	return &legacykey.ResultPredicate{AndResult: &legacykey.AndResult{ResultPredicates: []legacykey.ResultPredicate{
		{StringFragment: g.str("k=", "")}, g.value(),
	}}}
}

func (g randomRules) config() *legacykey.Config {
	c := &legacykey.Config{}
	for i := 1 + g.r.IntN(3); i > 0; i-- {
		var f legacykey.Fragment
		for j := 1 + g.r.IntN(3); j > 0; j-- {
			f.Rules = append(f.Rules, legacykey.FragmentRule{Match: g.match(2), Result: g.result()})
		}
		c.Fragments = append(c.Fragments, f)
	}
	return c
}

// randomFiles is how many random files TestRandomRulesConvertExactly tries.
var randomFiles = 150

// randomSeed seeds the random files.
var randomSeed uint64 = 42

// Random rules files (every predicate and result, nested, with regexes
// that match "" or do not compile, empty values and absent metadata)
// convert into rules that group generated requests exactly as the earlier
// relay did, or are refused with a reason.
func TestRandomRulesConvertExactly(t *testing.T) {
	g := randomRules{r: rand.New(rand.NewPCG(randomSeed, 7))}
	converted := 0
	for i := 0; i < randomFiles; i++ {
		c := g.config()
		text, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		// Through the file format, as migrate-rules reads it.
		if c, err = legacykey.Parse(text); err != nil {
			t.Fatalf("config %d does not parse: %v\n%s", i, err, text)
		}
		conv, err := Convert(c, "legacy")
		if errors.Is(err, ErrNotConvertible) {
			continue
		}
		if err != nil {
			t.Fatalf("config %d: %v", i, err)
		}
		if problems := aggregation.Validate(conv.Rules, []string{"legacy"}); len(problems) > 0 {
			t.Fatalf("config %d: converted rules do not validate: %v\n%s", i, problems, text)
		}
		rep, err := Verify(c, conv.Rules, Generate(c, 400, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Differences) > 0 {
			t.Fatalf("config %d: %d differences; the first: %v\n%s", i, len(rep.Differences), rep.Differences[0], text)
		}
		converted++
	}
	if converted < randomFiles/3 {
		t.Errorf("only %d of %d random files converted: the test tests little", converted, randomFiles)
	}
}
