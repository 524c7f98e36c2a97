package loadgen

import "errors"

// ErrConfig is wrapped by every problem Config.Validate reports.
var ErrConfig = errors.New("loadgen: invalid config")
