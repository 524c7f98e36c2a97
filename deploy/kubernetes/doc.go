// Package kubernetes holds the relay's Kubernetes manifests (the YAML files
// beside this one, and two-tier/) and the test that decodes each of them
// strictly into the Kubernetes API types, so a misspelt field fails
// `make test` instead of a deploy.
package kubernetes
