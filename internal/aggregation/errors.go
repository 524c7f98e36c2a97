package aggregation

import "errors"

// ErrNoMatch is returned by Match when no rule matches a request.
var ErrNoMatch = errors.New("no aggregation rule matches")

// ErrInvalidRules is returned by Compile for a rule set Validate rejects.
var ErrInvalidRules = errors.New("invalid aggregation rules")
