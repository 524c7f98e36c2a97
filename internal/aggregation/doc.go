// Package aggregation maps a request (type URL, resource name, client node)
// to the authority and group key that serve it. xdstp names are their own
// key; legacy names are grouped by YAML rules matched on node fields.
// It imports nothing of the project.
package aggregation
