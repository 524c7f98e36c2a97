package loadgen

import "errors"

// ErrConfig is wrapped by every problem Config.Validate reports.
var ErrConfig = errors.New("loadgen: invalid config")

// ErrNotSynced: when the fleet stopped, some clients did not have every
// name they subscribed to (Status.SyncError).
var ErrNotSynced = errors.New("loadgen: clients did not sync")
