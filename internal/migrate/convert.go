package migrate

import (
	"errors"
	"fmt"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/internal/aggregation"
	"github.com/xds-relay/xds-relay/internal/migrate/legacykey"
)

// KeyPrefix starts every converted group key: the earlier relay's key may
// be a value alone, and a group key needs a literal. The same prefix on
// every key groups requests exactly as the keys without it.
const KeyPrefix = "legacy:"

// MaxRules bounds a conversion: rules whose combinations would need more
// converted rules are refused.
const MaxRules = 1000

// Refusal is a rule that cannot be converted, and why.
type Refusal struct {
	Fragment, Rule int
	Path           string // inside the rule, e.g. result.and_result
	Reason         string
}

func (r Refusal) Error() string {
	return fmt.Sprintf("fragments[%d].rules[%d].%s: %s", r.Fragment, r.Rule, r.Path, r.Reason)
}

// ErrNotConvertible is wrapped by Convert's error when some rule cannot be
// converted; the error joins a Refusal for each.
var ErrNotConvertible = errors.New("cannot be converted")

// Converted is a conversion's result: rules for one authority.
type Converted struct {
	Rules []aggregation.Rule
}

// edsTypes are refused without names by the earlier relay.
var edsTypes = []string{"type.googleapis.com/envoy.api.v2.ClusterLoadAssignment", resourcev3.EndpointType}

// Convert converts a legacy rules file into first-match rules whose
// results name authority. A request is grouped with another by the
// converted rules exactly when the earlier relay built both the same key,
// and refused exactly when it refused it, as one request per resource
// name (the relay groups each name by itself; the earlier relay grouped a
// request by its first name).
func Convert(c *legacykey.Config, authority string) (*Converted, error) {
	if refusals := check(c); len(refusals) > 0 {
		return nil, refusalsError(refusals)
	}
	cv := &converter{c: c, authority: authority}
	other, err := cv.tree("")
	if err != nil {
		return nil, err
	}
	groups, err := cv.typeGroups(namedTypes(c), signature(other))
	if err != nil {
		return nil, err
	}
	if allRefuse(other) {
		groups = dropAllRefuse(groups)
	}
	out := &Converted{Rules: assemble(groups, other, authority)}
	if len(out.Rules) > MaxRules {
		return nil, fmt.Errorf("%w: the rules' combinations need %d converted rules (more than %d)", ErrNotConvertible, len(out.Rules), MaxRules)
	}
	return out, nil
}

// refusalsError is Convert's error for what check refused: ErrNotConvertible
// and every refusal, joined.
func refusalsError(refusals []Refusal) error {
	errs := make([]error, len(refusals))
	for i := range refusals {
		errs[i] = refusals[i]
	}
	return fmt.Errorf("%w: %w", ErrNotConvertible, errors.Join(errs...))
}
