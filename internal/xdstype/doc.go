// Package xdstype is what the relay knows about xDS resource types, in
// one place for every component:
//   - ResourceWrapperURL, the type URL of the SotW TTL wrapper
//     (envoy.service.discovery.v3.Resource);
//   - Label, the type label of every metric: the served types and those an
//     operator listed (List), else "other", so no type URL a client or
//     origin sends can grow the label set;
//   - CheckTypeURL, what a type URL an operator lists must look like;
//   - Named, whether a type's resources carry their name in their message;
//   - the registration of the resource types (register.go), so that
//     protoregistry and protojson know them wherever the relay needs to.
//
// It imports nothing of the project.
package xdstype
