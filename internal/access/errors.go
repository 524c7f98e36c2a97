package access

import "errors"

// ErrDenied: the client's identity matches no rule of the authority and
// type it asked for.
var ErrDenied = errors.New("permission denied")

// ErrNodeMismatch: the node a client claims is not the one its
// certificate names (Policy.CheckNode).
var ErrNodeMismatch = errors.New("node does not match the client certificate")

// ErrInvalidPolicy: New was given a rule without exactly one matcher, an
// empty pattern or a bad node identity template.
var ErrInvalidPolicy = errors.New("invalid access policy")
