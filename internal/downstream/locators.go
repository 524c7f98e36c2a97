package downstream

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refuseLocators refuses a request that names resources by
// ResourceLocator (resource_locators, resource_locators_subscribe or
// _unsubscribe): dynamic parameters (xRFC TP2) are not served yet, and a
// request that names nothing else would otherwise read as the legacy
// wildcard and get every resource of its type. n is the length of field.
// docs/protocol.md, "Dynamic parameters", has the design for serving them.
func (s *Server) refuseLocators(typeURL, field string, n int) error {
	if n == 0 {
		return nil
	}
	s.m.requestErrors.WithLabelValues(typeLabel(typeURL), reasonDynamicParams).Inc()
	return status.Errorf(codes.InvalidArgument, "%v: %s has %d locators (type %s); name resources in the resource_names fields",
		ErrDynamicParameters, field, n, quoteShort(typeURL))
}
