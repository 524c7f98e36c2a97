package downstream

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-relay/xds-relay/internal/aggregation"
)

// NodeKeeper is implemented by a Resolver that can say which part of a
// client's Node it reads: a session keeps only that part for its stream's
// life (the rest of a Node, up to the request size, is dropped with the
// request that carried it).
type NodeKeeper interface {
	KeepNode(n *corev3.Node) *corev3.Node
}

// KeepNode implements NodeKeeper: id, cluster, locality, and the metadata
// the aggregation rules read.
func (r *NameResolver) KeepNode(n *corev3.Node) *corev3.Node {
	if k, ok := r.rules.(NodeKeeper); ok {
		return k.KeepNode(n)
	}
	return aggregation.KeepNodeFields(n)
}

// keepNode returns what a session keeps of n: the part the resolver in
// use reads (id, cluster and locality when it cannot say). Each string
// kept is at most MaxNameLength bytes; a longer one is refused with
// InvalidArgument naming the limit.
func (s *Server) keepNode(n *corev3.Node) (*corev3.Node, error) {
	var kept *corev3.Node
	if k, ok := s.currentResolver().(NodeKeeper); ok {
		kept = k.KeepNode(n)
	} else {
		kept = aggregation.KeepNodeFields(n)
	}
	max := s.limits().MaxNameLength
	for _, f := range []struct{ field, v string }{
		{"id", kept.GetId()}, {"cluster", kept.GetCluster()}, {"locality.region", kept.GetLocality().GetRegion()},
		{"locality.zone", kept.GetLocality().GetZone()}, {"locality.sub_zone", kept.GetLocality().GetSubZone()},
	} {
		if len(f.v) > max {
			return nil, s.nodeTooLong("node."+f.field, len(f.v), max)
		}
	}
	if err := s.checkMetadata("node.metadata", kept.GetMetadata(), max); err != nil {
		return nil, err
	}
	return kept, nil
}

// checkMetadata refuses a kept metadata string longer than max.
func (s *Server) checkMetadata(path string, st *structpb.Struct, max int) error {
	for k, v := range st.GetFields() {
		p := path + "." + clientText(k)
		if sub := v.GetStructValue(); sub != nil {
			if err := s.checkMetadata(p, sub, max); err != nil {
				return err
			}
			continue
		}
		if n := len(v.GetStringValue()); n > max {
			return s.nodeTooLong(p, n, max)
		}
	}
	return nil
}

func (s *Server) nodeTooLong(field string, n, max int) error {
	return s.overLimit(limitNameLength, codes.InvalidArgument,
		"%s of %d bytes, over the limit of %d (downstream.limits.max_name_length)", field, n, max)
}
