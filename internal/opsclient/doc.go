// Package opsclient is the Go client oapi-codegen generates from
// docs/openapi-ops.yaml, the operator endpoints, committed as generated for
// the same checks as apiclient.
package opsclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../docs/openapi-ops.yaml
