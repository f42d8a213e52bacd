// Package examplecloud is the toy cloud of the example provider: what a cloud's Go SDK
// is to a real provider. It keeps instances, load balancers and routes in a JSON file
// (or only in memory), answers with typed API errors the way a cloud's HTTP API does,
// and has fault knobs (latency, outage, throttling) for tests.
//
// It is deliberately not shaped like nephele's provider contract: its deletes of
// missing objects fail with 404, creating an existing route fails with 409, and
// instances are looked up by ID or by host name. Package provider shows how to turn
// such an API into a provider that keeps the contract.
package examplecloud
