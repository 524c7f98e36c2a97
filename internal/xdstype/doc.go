// Package xdstype holds what the relay knows about xDS resource types, in
// one place for every component:
//   - ResourceWrapperURL, the type URL of the SotW TTL wrapper
//     (envoy.service.discovery.v3.Resource);
//   - Label, the type label of every metric: a fixed set of values, so no
//     type URL a client or origin sends can grow the label set;
//   - the registration of the resource types (register.go), so that
//     protoregistry and protojson know them wherever the relay needs to.
//
// It imports nothing of the project.
package xdstype
