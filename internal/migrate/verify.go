package migrate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// Outcome is what one key builder made of a request: a group, or a
// refusal.
type Outcome struct {
	Group   string // legacy: the key; converted: authority + "\x00" + group key
	Refused string // the reason, when refused
}

func (o Outcome) String() string {
	if o.Refused != "" {
		return "refused (" + o.Refused + ")"
	}
	return fmt.Sprintf("group %q", strings.ReplaceAll(o.Group, "\x00", " "))
}

// Difference is a request the two key builders treat differently: with
// Other, grouped together by one and apart by the other; without, refused
// by one only.
type Difference struct {
	Request      Request
	Legacy, Ours Outcome
	Other        *Request // the request it is (not) grouped with
	OtherLegacy  Outcome
	OtherOurs    Outcome
}

func (d Difference) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: earlier relay %v, converted %v", describe(d.Request), d.Legacy, d.Ours)
	if d.Other != nil {
		fmt.Fprintf(&b, "; but %s: earlier relay %v, converted %v", describe(*d.Other), d.OtherLegacy, d.OtherOurs)
	}
	return b.String()
}

// describe prints a request for a report.
func describe(r Request) string {
	name := fmt.Sprintf("%q", r.Name)
	if r.Name == "" {
		name = "wildcard"
	}
	n := r.Node
	s := fmt.Sprintf("type %s, name %s, node id %q cluster %q", r.TypeURL, name, n.GetId(), n.GetCluster())
	if l := n.GetLocality(); l != nil {
		s += fmt.Sprintf(" locality %q/%q/%q", l.GetRegion(), l.GetZone(), l.GetSubZone())
	}
	if md := n.GetMetadata(); md != nil {
		s += fmt.Sprintf(" metadata %v", md.AsMap())
	} else {
		s += " no metadata"
	}
	return s
}

// Report is the result of Verify.
type Report struct {
	Requests    int
	Groups      int // distinct groups (the earlier relay's keys)
	Refused     int // requests both refused
	Differences []Difference
}

// Verify replays requests through the earlier relay's key builder (with
// legacy) and through the converted rules (as the relay matches them: on
// the node KeepNode keeps) and returns every request they group
// differently.
func Verify(legacy *legacykey.Config, converted []aggregation.Rule, requests []Request) (*Report, error) {
	rules, err := aggregation.Compile(converted)
	if err != nil {
		return nil, fmt.Errorf("converted rules: %w", err)
	}
	keyer := legacykey.New(legacy)
	v := &verifier{
		rep:      &Report{Requests: len(requests)},
		requests: requests,
		byLegacy: map[string]int{},
		byOurs:   map[string]int{},
		outcomes: make([][2]Outcome, len(requests)),
	}
	for i, req := range requests {
		lo, oo, err := outcomes(keyer, rules, req)
		if err != nil {
			return nil, err
		}
		v.outcomes[i] = [2]Outcome{lo, oo}
		v.compare(i)
	}
	return v.rep, nil
}

// outcomes are what the earlier relay's key builder and the converted
// rules make of req; err is an error of the rules other than a refusal.
func outcomes(keyer *legacykey.Keyer, rules *aggregation.Rules, req Request) (lo, oo Outcome, err error) {
	lreq := legacykey.Request{TypeURL: req.TypeURL, Node: req.Node}
	if req.Name != "" {
		lreq.Names = []string{req.Name}
	}
	if key, err := keyer.Key(lreq); err != nil {
		lo.Refused = err.Error()
	} else {
		lo.Group = key
	}
	res, err := rules.Match(aggregation.Request{TypeURL: req.TypeURL, Name: req.Name, Node: rules.KeepNode(req.Node)})
	switch {
	case err == nil:
		oo.Group = res.Authority + "\x00" + res.Group
	case errors.Is(err, aggregation.ErrRefused), errors.Is(err, aggregation.ErrNoMatch):
		oo.Refused = err.Error()
	default:
		return Outcome{}, Outcome{}, err
	}
	return lo, oo, nil
}

// verifier is the state of Verify: the outcomes so far, and the first
// request of each group on either side.
type verifier struct {
	rep      *Report
	requests []Request
	byLegacy map[string]int // legacy key -> first request
	byOurs   map[string]int // our group -> first request
	outcomes [][2]Outcome
}

// compare records request i's difference, if any, against the requests
// before it: refused by one side only, or grouped with an earlier request
// by one side and not the other.
func (v *verifier) compare(i int) {
	req, lo, oo := v.requests[i], v.outcomes[i][0], v.outcomes[i][1]
	switch {
	case (lo.Refused != "") != (oo.Refused != ""):
		v.rep.Differences = append(v.rep.Differences, Difference{Request: req, Legacy: lo, Ours: oo})
		return
	case lo.Refused != "":
		v.rep.Refused++
		return
	}
	jl, seenL := v.byLegacy[lo.Group]
	jo, seenO := v.byOurs[oo.Group]
	switch {
	case seenL && v.outcomes[jl][1].Group != oo.Group:
		v.diff(i, jl) // together before, apart now
	case seenO && v.outcomes[jo][0].Group != lo.Group:
		v.diff(i, jo) // apart before, together now
	}
	if !seenL {
		v.byLegacy[lo.Group] = i
		v.rep.Groups++
	}
	if !seenO {
		v.byOurs[oo.Group] = i
	}
}

// diff records that requests i and j are grouped together by one side
// and apart by the other.
func (v *verifier) diff(i, j int) {
	other := v.requests[j]
	v.rep.Differences = append(v.rep.Differences, Difference{Request: v.requests[i], Legacy: v.outcomes[i][0], Ours: v.outcomes[i][1],
		Other: &other, OtherLegacy: v.outcomes[j][0], OtherOurs: v.outcomes[j][1]})
}
