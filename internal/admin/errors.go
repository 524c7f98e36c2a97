package admin

import "errors"

// The propagation pages' refusals (400).
var (
	errNoNode   = errors.New("?node= (a node id) is required")
	errBadLimit = errors.New("?limit= must be a number, 0 or more")
)
