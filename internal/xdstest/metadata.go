package xdstest

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Annotations is resource metadata of about n bytes, in 1 KiB strings, as
// an origin that annotates its resources sends (the Resource wrapper's
// metadata): what a test of the bytes a resource takes sends beside a
// small body.
func Annotations(n int) *corev3.Metadata {
	fields := make(map[string]*structpb.Value)
	for i := range n / 1024 {
		fields[fmt.Sprintf("k%04d", i)] = structpb.NewStringValue(strings.Repeat("m", 1024-8))
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"annotations": {Fields: fields}}}
}
