package admin

import (
	"net/http"
	"strconv"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/csds"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/propagation"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// The components' JSON pages: each component returns plain values
// (cache.Inspect, upstream Links, downstream ClientsPage, NacksPage and
// ClientProgress, csds Debug, delivery Page, propagation Page); here is
// their HTTP side: the query read, the status of a refusal, the headers.
// No component imports net/http for its page.

// ClientsCutHeader is set on a ClientsPath page that does not list every
// connected client: "<shown> of <total>" (downstream.Server.ClientsPage).
const ClientsCutHeader = "X-Xds-Relay-Clients-Cut"

// cachePage is CachePath: the cached keys ParseFilter's query selects; a
// bad parameter is a 400 naming it.
func cachePage(c *cache.Cache) http.Handler {
	return jsonPage(CachePath, func(req *http.Request, _ http.Header) (any, error) {
		f, err := cache.ParseFilter(req.URL.Query())
		if err != nil {
			return nil, pageError{http.StatusBadRequest, err}
		}
		return c.Inspect(f), nil
	})
}

// upstreamsPage is UpstreamsPath: every link, and every authority without
// one.
func upstreamsPage(up *upstream.Manager) http.Handler {
	return jsonPage(UpstreamsPath, func(*http.Request, http.Header) (any, error) {
		return up.Links(), nil
	})
}

// clientsPage is ClientsPath: the connected clients, with
// ClientsCutHeader when not all of them are listed.
func clientsPage(ds *downstream.Server) http.Handler {
	return jsonPage(ClientsPath, func(_ *http.Request, h http.Header) (any, error) {
		clients, cut := ds.ClientsPage()
		if cut != "" {
			h.Set(ClientsCutHeader, cut)
		}
		return clients, nil
	})
}

// nacksPage is NacksPath: the recent client NACKs.
func nacksPage(ds *downstream.Server) http.Handler {
	return jsonPage(NacksPath, func(*http.Request, http.Header) (any, error) {
		return ds.NacksPage(), nil
	})
}

// csdsPage is CSDSPath: client status counted per client stream
// (?node_id= for one node), with csds.TruncatedHeader when cut; 503 when
// no report can be built now. Never cached by the browser.
func csdsPage(s *csds.Server) http.Handler {
	return jsonPage(CSDSPath, func(req *http.Request, h http.Header) (any, error) {
		sum, note, err := s.Debug(req.Context(), req.URL.Query().Get("node_id"))
		if err != nil {
			return nil, pageError{http.StatusServiceUnavailable, err}
		}
		if note != "" {
			h.Set(csds.TruncatedHeader, note)
		}
		h.Set("Cache-Control", "no-store")
		return sum, nil
	})
}

// deliveryPage is DeliveryPath: safe delivery's holds, rollouts and
// settings. Never cached by the browser.
func deliveryPage(d *delivery.Delivery) http.Handler {
	return jsonPage(DeliveryPath, func(_ *http.Request, h http.Header) (any, error) {
		h.Set("Cache-Control", "no-store")
		return d.Page(), nil
	})
}

// propagationPage is PropagationPath: the ledger's latest changes
// (?authority= ?type= ?limit= ?buckets=1); l nil (propagation off)
// answers an empty page.
func propagationPage(l *propagation.Ledger) http.Handler {
	return jsonPage(PropagationPath, func(req *http.Request, h http.Header) (any, error) {
		q, err := propagationQuery(req)
		if err != nil {
			return nil, pageError{http.StatusBadRequest, err}
		}
		h.Set("Cache-Control", "no-store")
		return l.Page(q), nil
	})
}

// propagationQuery reads PropagationPath's query.
func propagationQuery(req *http.Request) (propagation.PageQuery, error) {
	v := req.URL.Query()
	q := propagation.PageQuery{Authority: v.Get("authority"), Type: v.Get("type"), Detail: v.Get("buckets") == "1"}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, errBadLimit
		}
		q.Limit = n
	}
	return q, nil
}

// clientProgressPage is PropagationClientPath: one node's streams, per
// resource (?node=, required).
func clientProgressPage(ds *downstream.Server) http.Handler {
	return jsonPage(PropagationClientPath, func(req *http.Request, h http.Header) (any, error) {
		node := req.URL.Query().Get("node")
		if node == "" {
			return nil, pageError{http.StatusBadRequest, errNoNode}
		}
		h.Set("Cache-Control", "no-store")
		return ds.ClientProgress(node), nil
	})
}
