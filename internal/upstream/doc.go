// Package upstream keeps one xDS stream per authority (and aggregation group)
// toward the origin control planes, carrying the union of every client's
// subscriptions, and feeds what the origin sends into the cache.
package upstream
