// Package api holds the wire types of the local cloud's HTTP/JSON API, shared by the
// server and the Go client: instances, load balancers, routes, fault rules, the error
// body, the operation names used for fault knobs and call accounting, and the
// validation every request body goes through before anything is written.
//
// Validation errors are *FieldError values naming the offending field the way the
// answer's "field" member does, for example "spec.ports[0].protocol".
package api
