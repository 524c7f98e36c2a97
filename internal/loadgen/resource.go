package loadgen

import (
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// sotwResource returns the name and serialized body of one resource of a
// SotW response, without decoding the resource itself: every xDS resource
// type keeps its name in field 1 (Listener.name, Cluster.name,
// ClusterLoadAssignment.cluster_name, RouteConfiguration.name, ...).
func sotwResource(a *anypb.Any) (name string, body []byte, err error) {
	if a.GetTypeUrl() == xdstype.ResourceWrapperURL {
		var r discoveryv3.Resource
		if err := proto.Unmarshal(a.GetValue(), &r); err != nil {
			return "", nil, fmt.Errorf("decode Resource wrapper: %w", err)
		}
		return r.GetName(), r.GetResource().GetValue(), nil
	}
	body = a.GetValue()
	name, err = fieldOneString(body)
	if err != nil {
		return "", nil, fmt.Errorf("resource of type %s: %w", a.GetTypeUrl(), err)
	}
	return name, body, nil
}

// fieldOneString returns the string in field 1 of a serialized message.
func fieldOneString(b []byte) (string, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", fmt.Errorf("malformed tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", fmt.Errorf("malformed name field: %w", protowire.ParseError(n))
			}
			return string(v), nil
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", fmt.Errorf("malformed field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return "", fmt.Errorf("no name in field 1")
}
