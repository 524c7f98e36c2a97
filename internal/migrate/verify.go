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
	rep := &Report{Requests: len(requests)}
	byLegacy := map[string]int{} // legacy key -> first request
	byOurs := map[string]int{}   // our group -> first request
	outcomes := make([][2]Outcome, len(requests))
	for i, req := range requests {
		lreq := legacykey.Request{TypeURL: req.TypeURL, Node: req.Node}
		if req.Name != "" {
			lreq.Names = []string{req.Name}
		}
		var lo, oo Outcome
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
			return nil, err
		}
		outcomes[i] = [2]Outcome{lo, oo}
		diff := func(j int) {
			other := requests[j]
			rep.Differences = append(rep.Differences, Difference{Request: req, Legacy: lo, Ours: oo,
				Other: &other, OtherLegacy: outcomes[j][0], OtherOurs: outcomes[j][1]})
		}
		switch {
		case (lo.Refused != "") != (oo.Refused != ""):
			rep.Differences = append(rep.Differences, Difference{Request: req, Legacy: lo, Ours: oo})
			continue
		case lo.Refused != "":
			rep.Refused++
			continue
		}
		jl, seenL := byLegacy[lo.Group]
		jo, seenO := byOurs[oo.Group]
		switch {
		case seenL && outcomes[jl][1].Group != oo.Group:
			diff(jl) // together before, apart now
		case seenO && outcomes[jo][0].Group != lo.Group:
			diff(jo) // apart before, together now
		}
		if !seenL {
			byLegacy[lo.Group] = i
			rep.Groups++
		}
		if !seenO {
			byOurs[oo.Group] = i
		}
	}
	return rep, nil
}
