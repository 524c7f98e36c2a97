package downstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-relay/xds-relay/internal/access"

	// The resource and common extension types, so JSON can name them in
	// Anys: registered in one place for the whole relay.
	_ "github.com/xds-relay/xds-relay/internal/xdstype"
)

// RESTPathPrefix is where REST-JSON polling is served: POST
// /v3/discovery:<kind> with a JSON DiscoveryRequest body.
const RESTPathPrefix = "/v3/discovery:"

// maxRESTBody bounds a REST request body.
const maxRESTBody = 1 << 20

// restTypes maps the path's kind to a type URL (Envoy's REST paths).
var restTypes = map[string]string{
	"listeners":         resourcev3.ListenerType,
	"routes":            resourcev3.RouteType,
	"scoped-routes":     resourcev3.ScopedRouteType,
	"clusters":          resourcev3.ClusterType,
	"endpoints":         resourcev3.EndpointType,
	"secrets":           resourcev3.SecretType,
	"runtime":           resourcev3.RuntimeType,
	"extension_configs": resourcev3.ExtensionConfigType,
}

// RESTHandler serves REST-JSON polling; mount it at RESTPathPrefix.
func (s *Server) RESTHandler() http.Handler {
	return http.HandlerFunc(s.serveREST)
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "REST-JSON discovery takes POST", http.StatusMethodNotAllowed)
		return
	}
	kind := strings.TrimPrefix(r.URL.Path, RESTPathPrefix)
	typeURL, ok := restTypes[kind]
	if !ok || !strings.HasPrefix(r.URL.Path, RESTPathPrefix) {
		http.Error(w, fmt.Sprintf("unknown discovery path %q", r.URL.Path), http.StatusNotFound)
		return
	}
	// A poll has a place among max_streams from here, its body read
	// included (rest_listen's read timeout bounds that).
	leave, err := s.admitStream()
	if err != nil {
		http.Error(w, status.Convert(err).Message(), http.StatusServiceUnavailable)
		return
	}
	defer leave()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRESTBody+1))
	if err != nil || len(body) > maxRESTBody {
		http.Error(w, "request body unreadable or larger than 1 MiB", http.StatusBadRequest)
		return
	}
	req := &discoveryv3.DiscoveryRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		http.Error(w, fmt.Sprintf("%s: body is not a JSON DiscoveryRequest: %v", r.URL.Path, err), http.StatusBadRequest)
		return
	}
	resp, err := s.fetch(r.Context(), req, typeURL, access.FromTLS(r.TLS))
	if err != nil {
		if errors.Is(err, ErrNotModified) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		http.Error(w, status.Convert(err).Message(), httpCode(status.Code(err)))
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		s.lg.Warn("cannot encode REST response", zap.String("type_url", typeURL), zap.Error(err))
		http.Error(w, fmt.Sprintf("encode response as JSON: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func httpCode(c codes.Code) int {
	switch c {
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.FailedPrecondition:
		return http.StatusPreconditionFailed
	case codes.Canceled, codes.DeadlineExceeded:
		return http.StatusRequestTimeout
	}
	return http.StatusServiceUnavailable
}
