// Package apiclient is the Go client oapi-codegen generates from
// docs/openapi.yaml, committed as generated. It is there to prove the
// document in the form SDK authors consume it: the command's tests check
// that regenerating it gives the same bytes, and call every read of the
// real binary through it, decoding every status the service answers.
package apiclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../docs/openapi.yaml
