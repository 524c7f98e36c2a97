package xdstype

import (
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Named reports whether the relay can read the name of a resource of
// typeURL from its message, as upstream does (go-control-plane's
// GetResourceName): the message type is registered in this process and
// has a name, a GetName() string (a `name` field) or, for
// ClusterLoadAssignment, cluster_name. Every served type but LbEndpoint
// has one; a type registered nowhere here (an operator's own) or a message
// without a name (google.protobuf.Struct) has none, so its body alone does
// not say which resource it is.
func Named(typeURL string) bool {
	if typeURL == resourcev3.EndpointType {
		return true
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
	if err != nil {
		return false
	}
	_, ok := mt.Zero().Interface().(interface{ GetName() string })
	return ok
}
