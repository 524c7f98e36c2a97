package aggregation

import (
	"errors"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

// Explanation says which rule serves a request and how: what
// `xds-relay explain` prints.
type Explanation struct {
	// Rule is the name of the first rule that matches the request, and
	// Index its index in the rules explained; "" and -1 when none does
	// (the relay refuses the request).
	Rule  string
	Index int
	// Refused is what the client is told when that rule refuses the
	// request (its refuse reason, or an empty refuse_empty part); "" when
	// the request is served.
	Refused string
	// Result is where the request is served from, when it is.
	Result Result
	// UpstreamNode is the Node the origin sees on the group's upstream
	// stream, when the request is served: the rule's node as written
	// (NodeFromRule), or the one built from the group key alone with
	// relayID as its id when the key sets none.
	UpstreamNode *corev3.Node
	NodeFromRule bool
}

// Explain compiles rules and matches req against them as the relay does,
// and says which rule serves it and how. Its only error is an invalid
// rule set (wrapping ErrInvalidRules, as Compile's); a request no rule
// serves is an Explanation with Index -1 or Refused set.
func Explain(rules []Rule, req Request, relayID string) (Explanation, error) {
	compiled, err := Compile(rules)
	if err != nil {
		return Explanation{}, err
	}
	res, err := compiled.Match(req)
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		return Explanation{Rule: refused.Rule, Index: ruleIndex(rules, refused.Rule), Refused: refused.Reason}, nil
	case err != nil:
		return Explanation{Index: -1}, nil // ErrNoMatch
	}
	ex := Explanation{Rule: res.Rule, Index: ruleIndex(rules, res.Rule), Result: res}
	if ex.Index >= 0 && rules[ex.Index].Result.Node != nil {
		ex.UpstreamNode, ex.NodeFromRule = res.Node, true
		return ex, nil
	}
	n := proto.Clone(res.Node).(*corev3.Node) // the group's node is shared: read only
	if n.GetId() == "" {
		n.Id = relayID
	}
	ex.UpstreamNode = n
	return ex, nil
}

// ruleIndex is the index of the rule named name in rules, or -1.
func ruleIndex(rules []Rule, name string) int {
	for i := range rules {
		if rules[i].Name == name {
			return i
		}
	}
	return -1
}
