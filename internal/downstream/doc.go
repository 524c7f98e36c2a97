// Package downstream serves xDS clients: every SotW and delta variant, ADS and
// per-type services, and REST-JSON polling. One session per client stream,
// with its own nonces, ACK/NACK state and subscriptions, and one writer that
// only ever sends the newest state.
package downstream
