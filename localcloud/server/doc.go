// Package server is the local cloud service: it ties the state store, the load
// balancer data plane and the fault injector together behind the versioned HTTP/JSON
// API under /v1, with bearer-token authentication, /admin/faults for changing fault
// rules at run time, /metrics (Prometheus) counting and timing calls per operation
// and status code, and an open /healthz.
//
// Every request body is decoded strictly and validated completely before anything is
// written; load balancer changes open their listeners before the state is written and
// keep neither if either fails. docs/localcloud.md is the API reference.
package server
