// Package upstream keeps one xDS stream per authority (and aggregation group)
// toward the origin control planes, carrying the union of every client's
// subscriptions, and feeds what the origin sends into the cache.
//
// Words, as this package uses them (downstream's "session" is a client's
// stream; nothing here is called a session):
//
//   - link (link.go): the relay's upstream for one cache.LinkID
//     (authority + aggregation group). It has the subscriptions the cache
//     wants on it and one run goroutine that carries them to the
//     authority's origins, attempt after attempt. A link lives from its
//     LinkID's first Subscribe until Manager.Close.
//   - attempt (attempt.go): one try at serving a link from one origin:
//     dial, open one ADS stream (delta.go or sotw.go; or one stream per
//     type on the per-type services: pertype.go), sync and handle
//     responses until the stream fails, the link's context ends or failback
//     ends it (failback.go); for a file:// origin, follow the file source
//     (filesource.go). An attempt that got a response is healthy: the next
//     one starts over at the first origin without growing the backoff.
//   - stream: the gRPC ADS stream of one attempt, as in the logs ("upstream
//     stream open", "upstream stream lost") and xds_relay_upstream_streams.
//   - origin: one of an authority's control planes ("host:port") or a
//     directory of resource files ("file://DIR"), in failover order.
//
// Validation of what an origin sends (validate.go) turns a response into a
// cache.Update or a NACK reason.
package upstream
