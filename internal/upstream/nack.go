package upstream

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// maxRefusalDetail bounds the error_detail message of a NACK of refused
// resources; past it the rest are counted.
const maxRefusalDetail = 4096

// refusalNACK is the error_detail of the answer to a response of type t
// part of which the cache refused (delivery.validate: an invalid version
// is not cached): the response is NACKed, naming each refused resource and
// why (the validation error names the field). nil when nothing was
// refused: the answer is an ACK. The rest of the response was applied:
// one bad resource does not delay the others (docs/delivery.md).
func (l *link) refusalNACK(t string, refused []cache.Refusal) *statuspb.Status {
	if len(refused) == 0 {
		return nil
	}
	l.mgr.metrics.nacks.WithLabelValues(xdstype.Label(t), nackInvalid).Inc()
	msg := refusalMessage(t, refused)
	l.lg.Debug("origin response NACKed: resources refused, the rest applied", zap.String("type_url", t), zap.Int("refused", len(refused)))
	return &statuspb.Status{Code: int32(codes.InvalidArgument), Message: msg}
}

// refusalMessage names each refused resource of type t with its error,
// within maxRefusalDetail bytes.
func refusalMessage(t string, refused []cache.Refusal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d resource(s) of %s refused by the relay (delivery.validate), the rest of the response applied", len(refused), t)
	for i, r := range refused {
		part := fmt.Sprintf("; resource %q: %v", r.Name, r.Err)
		if b.Len()+len(part) > maxRefusalDetail {
			fmt.Fprintf(&b, "; and %d more", len(refused)-i)
			break
		}
		b.WriteString(part)
	}
	return b.String()
}
