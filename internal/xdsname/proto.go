package xdsname

import (
	"fmt"
	"sort"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
)

// ResourceName returns n in the proto3 encoding TP1 gives xdstp URNs,
// xds.core.v3.ResourceName. Only URNs have one: a glob or a name with
// processing directives is a URL (xds.core.v3.ResourceLocator) and gets an
// error.
func (n Name) ResourceName() (*xdscorev3.ResourceName, error) {
	if !n.IsURN() {
		return nil, fmt.Errorf("xdstp name %q: %w: a URL (glob or directives) has no ResourceName", n.String(), ErrNotURN)
	}
	rn := &xdscorev3.ResourceName{Id: n.ID, Authority: n.Authority, ResourceType: n.Type}
	if len(n.Params) > 0 {
		rn.Context = &xdscorev3.ContextParams{Params: make(map[string]string, len(n.Params))}
		for _, p := range n.Params {
			rn.Context.Params[p.Key] = p.Value
		}
	}
	return rn, nil
}

// FromResourceName is the inverse of ResourceName. A ResourceName is a URN,
// so an id whose last segment is "*" is that literal character, not a glob.
// The result is checked as Parse checks a name (a type, a non-empty id, no
// empty parameter key, no control characters).
func FromResourceName(rn *xdscorev3.ResourceName) (Name, error) {
	if rn == nil {
		return Name{}, fmt.Errorf("xds.core.v3.ResourceName: %w", ErrNoType)
	}
	n := Name{Authority: rn.GetAuthority(), Type: rn.GetResourceType(), ID: rn.GetId()}
	n.LiteralStar = n.ID == "*" || strings.HasSuffix(n.ID, "/*")
	for k, v := range rn.GetContext().GetParams() {
		n.Params = append(n.Params, Param{Key: k, Value: v})
	}
	sort.Slice(n.Params, func(i, j int) bool { return n.Params[i].Key < n.Params[j].Key })
	// The canonical string escapes every component, so Parse sees exactly
	// what the proto says and applies every rule names are kept to.
	parsed, err := Parse(n.String())
	if err != nil {
		return Name{}, fmt.Errorf("xds.core.v3.ResourceName: %w", err)
	}
	return parsed, nil
}
