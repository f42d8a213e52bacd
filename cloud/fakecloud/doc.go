// Package fakecloud is an in-memory, programmable cloud for unit tests. A *Cloud
// implements cloud.Provider with every capability; tests seed it with instances, read
// back the load balancers and routes the controllers made, switch capabilities off, and
// inject faults per operation: latency, errors (always, for the next N calls, or from a
// hook that picks its targets), throttling with Retry-After and calls that hang until
// their context ends. Every call is logged so tests can count and order them.
//
// It is safe for concurrent use. It is not a model of any real cloud: for end-to-end
// tests use the local cloud (package localcloud) instead.
package fakecloud
