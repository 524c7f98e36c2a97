package aggregation

import (
	"errors"
	"fmt"
)

// ErrNoMatch is returned by Match when no rule matches a request.
var ErrNoMatch = errors.New("no aggregation rule matches")

// ErrInvalidRules is returned by Compile for a rule set Validate rejects.
var ErrInvalidRules = errors.New("invalid aggregation rules")

// ErrRefused is wrapped by the error Match returns for a request that a
// rule refuses (result refuse, or a refuse_empty part that is empty).
var ErrRefused = errors.New("refused by aggregation rule")

// RefusedError says which rule refused a request, and why.
type RefusedError struct {
	Rule   string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v %q: %s", ErrRefused, e.Rule, e.Reason)
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }
