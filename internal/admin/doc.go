// Package admin is the admin listener's one home: every route and page on
// it, their path constants (routes.go), the mux with its Host and
// cross-origin guard, the /debug/ index, the status page, and the HTTP
// side of every component's page (the query read, the status of a
// refusal, the headers, the one JSON writer).
//
// The components return data only (cache.Inspect, upstream Links,
// downstream ClientsPage, NacksPage and ClientProgress, csds Debug and
// Page, delivery Page and Release, propagation Page and Summary); none of
// them imports net/http for a page or this package. internal/relay builds
// the Server (New, with its readiness, reload and log level), hands it
// the components once built (AddPages), and binds and serves the listener.
//
// Words, as this package uses them:
//   - route: a path on the admin listener and its handler, mounted by
//     handle: behind the guard, counted in xds_relay_admin_requests_total,
//     and listed on the index when it has a description.
//   - page: what a route answers; a JSON page is written by jsonPage
//     (json.go) from the value its component returned.
//   - guard: the Host and cross-origin checks around every route
//     (guard.go).
//   - sources: the components a page reads (Sources).
package admin
