package xdstype

import (
	"strings"
	"testing"
	"unsafe"

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

// A type an operator lists is labelled by its own name; what a client
// invents stays "other", and List ignores what is not a type URL.
func TestListLabels(t *testing.T) {
	const listedType = "type.googleapis.com/mesh.example.v1.Listed"
	if got := Label(listedType); got != OtherLabel {
		t.Fatalf("before List: Label = %q, want %q", got, OtherLabel)
	}
	List(listedType, "not a type URL")
	if got := Label(listedType); got != "mesh.example.v1.Listed" {
		t.Fatalf("Label(listed) = %q, want its message name", got)
	}
	if got := Label("not a type URL"); got != OtherLabel {
		t.Fatalf("Label of an invalid listed entry = %q, want %q", got, OtherLabel)
	}
}

func TestCheckTypeURL(t *testing.T) {
	tests := []struct{ name, typeURL, wantErr string }{
		{"served", resourcev3.ClusterType, ""},
		{"custom", "type.googleapis.com/istio.workload.Address", ""},
		{"no prefix", "istio.workload.Address", "must start with"},
		{"other prefix", "example.com/istio.workload.Address", "must start with"},
		{"no package", "type.googleapis.com/Address", "not a full protobuf message name"},
		{"not a name", "type.googleapis.com/a b.C", "not a full protobuf message name"},
		{"empty message", "type.googleapis.com/", "not a full protobuf message name"},
		{"wrapper", ResourceWrapperURL, "resource wrapper"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTypeURL(tc.typeURL)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	for typeURL, want := range map[string]bool{
		resourcev3.ListenerType:                        true,
		resourcev3.EndpointType:                        true, // cluster_name
		resourcev3.SecretType:                          true,
		LbEndpointType:                                 false, // no name field
		"type.googleapis.com/google.protobuf.Struct":   false,
		"type.googleapis.com/mesh.example.v1.Workload": false, // registered nowhere
	} {
		if got := Named(typeURL); got != want {
			t.Errorf("Named(%s) = %v, want %v", typeURL, got, want)
		}
	}
}

// Intern gives one copy of a served or listed type URL, whatever copy it
// is given (a request's own); any other type URL as it is.
func TestIntern(t *testing.T) {
	List("type.googleapis.com/interned.listed.Type")
	for _, typeURL := range []string{resourcev3.ClusterType, "type.googleapis.com/interned.listed.Type"} {
		fresh := strings.Clone(typeURL)
		got, again := Intern(fresh), Intern(strings.Clone(typeURL))
		if got != typeURL || unsafe.StringData(got) == unsafe.StringData(fresh) || unsafe.StringData(got) != unsafe.StringData(again) {
			t.Errorf("Intern(%q) gave the copy it was given, or not the same copy twice", typeURL)
		}
	}
	other := strings.Clone("type.googleapis.com/not.listed.Type")
	if got := Intern(other); unsafe.StringData(got) != unsafe.StringData(other) {
		t.Error("Intern of a type URL neither served nor listed is not that string")
	}
}
