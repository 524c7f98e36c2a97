package xdstype

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoregistry"
)

func TestResourceWrapperURL(t *testing.T) {
	want := resourcev3.APITypePrefix + string((&discoveryv3.Resource{}).ProtoReflect().Descriptor().FullName())
	if ResourceWrapperURL != want {
		t.Fatalf("ResourceWrapperURL = %q, want %q", ResourceWrapperURL, want)
	}
}

// Every served type is registered, so upstream validates it and REST-JSON
// renders it.
func TestServedTypesRegistered(t *testing.T) {
	for _, typeURL := range []string{
		resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ScopedRouteType,
		resourcev3.VirtualHostType, resourcev3.ClusterType, resourcev3.EndpointType,
		resourcev3.SecretType, resourcev3.RuntimeType, resourcev3.ExtensionConfigType,
	} {
		if _, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL); err != nil {
			t.Errorf("%s: %v", typeURL, err)
		}
	}
}
