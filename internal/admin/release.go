package admin

import (
	"fmt"
	"net/http"
	"strings"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-relay/xds-relay/config"
	"github.com/xds-relay/xds-relay/internal/delivery"
)

// maxReleaseBody bounds a POST /debug/delivery/release body (a form).
const maxReleaseBody = 4 << 10

// releasePage is POST DeliveryReleasePath: it releases the held removals
// of the authority and type named (query or form; either absent: all),
// and answers with what it released as JSON, or, to the status page's
// form, with a redirect back to it. The guard (guard.go) refuses it from
// another site, as it does a reload. cfg is the running config: an
// authority it does not configure is a 400.
func releasePage(d *delivery.Delivery, cfg func() *config.Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		req.Body = http.MaxBytesReader(w, req.Body, maxReleaseBody)
		if err := req.ParseForm(); err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", DeliveryReleasePath, err), http.StatusBadRequest)
			return
		}
		authority, typeURL := req.Form.Get("authority"), releaseType(req.Form.Get("type"))
		if _, ok := cfg().Authority(authority); authority != "" && !ok {
			http.Error(w, fmt.Sprintf("%s: authority %q is not configured", DeliveryReleasePath, truncate(authority, 256)), http.StatusBadRequest)
			return
		}
		released := d.Release(authority, typeURL, "POST "+DeliveryReleasePath)
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			http.Redirect(w, req, "/#delivery", http.StatusSeeOther) // the status page's form
			return
		}
		writeJSON(w, struct {
			Released []delivery.Released `json:"released"`
		}{released})
	})
}

// releaseType is a type as the release endpoint takes it: a type URL, or
// a type label ("envoy.config.cluster.v3.Cluster").
func releaseType(t string) string {
	if t == "" || strings.HasPrefix(t, resourcev3.APITypePrefix) {
		return t
	}
	return resourcev3.APITypePrefix + t
}
