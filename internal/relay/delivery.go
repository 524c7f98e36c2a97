package relay

import (
	"fmt"
	"net/http"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/delivery"
	"github.com/xds-relay/xds-relay/internal/downstream"
	"github.com/xds-relay/xds-relay/internal/upstream"
)

// maxReleaseBody bounds a POST /debug/delivery/release body (a form).
const maxReleaseBody = 4 << 10

// buildDelivery builds safe delivery (internal/delivery), which the cache
// is built with (its Validator and RemovalGuard).
func (r *Relay) buildDelivery(cfg *config.Config, lg *zap.Logger, reg prometheus.Registerer) *delivery.Delivery {
	return delivery.New(delivery.Options{Config: cfg, Logger: lg, Registry: reg})
}

// addDelivery plugs d, on cache c, clients ds and origins up, into the
// relay's seams: its release loop, its JSON page and release endpoint,
// its reload. After the other components' reload hooks: it reads the
// authorities they applied.
func (r *Relay) addDelivery(d *delivery.Delivery, c *cache.Cache, ds *downstream.Server, up *upstream.Manager) {
	d.SetCache(c)
	d.SetFleet(ds)
	d.SetOrigins(up)
	r.goRun(d.Run)
	r.admin.handle(delivery.Path, "safe delivery: held removals and versions (why, since when, how many, which clients hold which version), rollouts wave by wave, invalid origin versions, settings (JSON)",
		jsonPage(delivery.Path, func(_ *http.Request, h http.Header) (any, error) {
			h.Set("Cache-Control", "no-store")
			return d.Page(), nil
		}))
	r.admin.handle(delivery.ReleasePath, "POST ?authority= &type= (both optional): release held removals, breaker holds and waves; clients are sent them (JSON)",
		http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.serveRelease(w, req, d) }))
	r.onReload(func(_, next *config.Config) error {
		d.SetConfig(next)
		return nil
	}, "delivery", "authorities")
}

// serveRelease is POST /debug/delivery/release: it releases the held
// removals of the authority and type named (query or form; either absent:
// all), and answers with what it released as JSON, or, to the status
// page's form, with a redirect back to it. The admin guard (adminguard.go)
// refuses it from another site, as it does a reload.
func (r *Relay) serveRelease(w http.ResponseWriter, req *http.Request, d *delivery.Delivery) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	req.Body = http.MaxBytesReader(w, req.Body, maxReleaseBody)
	if err := req.ParseForm(); err != nil {
		http.Error(w, fmt.Sprintf("%s: %v", delivery.ReleasePath, err), http.StatusBadRequest)
		return
	}
	authority, typeURL := req.Form.Get("authority"), releaseType(req.Form.Get("type"))
	if _, ok := r.config().Authority(authority); authority != "" && !ok {
		http.Error(w, fmt.Sprintf("%s: authority %q is not configured", delivery.ReleasePath, truncate(authority, 256)), http.StatusBadRequest)
		return
	}
	released := d.Release(authority, typeURL, "POST "+delivery.ReleasePath)
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		http.Redirect(w, req, "/#delivery", http.StatusSeeOther) // the status page's form
		return
	}
	writeJSON(w, struct {
		Released []delivery.Released `json:"released"`
	}{released})
}

// releaseType is a type as the release endpoint takes it: a type URL, or
// a type label ("envoy.config.cluster.v3.Cluster").
func releaseType(t string) string {
	if t == "" || strings.HasPrefix(t, resourcev3.APITypePrefix) {
		return t
	}
	return resourcev3.APITypePrefix + t
}
