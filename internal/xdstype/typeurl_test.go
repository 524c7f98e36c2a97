package xdstype

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Type labels stay a fixed set whatever type URLs clients send on ADS.
func TestLabel(t *testing.T) {
	tests := []struct{ name, typeURL, want string }{
		{"served type", resourcev3.ClusterType, "envoy.config.cluster.v3.Cluster"},
		{"any other ADS type", "type.googleapis.com/made.up.Type", "other"},
		{"empty", "", "other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Label(tc.typeURL); got != tc.want {
				t.Fatalf("Label(%q) = %q, want %q", tc.typeURL, got, tc.want)
			}
		})
	}
}

func TestResourceWrapperURL(t *testing.T) {
	want := resourcev3.APITypePrefix + string((&discoveryv3.Resource{}).ProtoReflect().Descriptor().FullName())
	if ResourceWrapperURL != want {
		t.Fatalf("ResourceWrapperURL = %q, want %q", ResourceWrapperURL, want)
	}
}

// Every type a label names is registered, so upstream validates it and
// REST-JSON renders it.
func TestKnownTypesRegistered(t *testing.T) {
	for typeURL := range known {
		if _, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL); err != nil {
			t.Errorf("%s: %v", typeURL, err)
		}
	}
}
