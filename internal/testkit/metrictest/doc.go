// Package metrictest reads a metric's value from a Prometheus registry in tests, by the
// name and labels a dashboard would use.
//
// client_golang's testutil reads a collector a test holds (ToFloat64) or compares a
// whole exposition (GatherAndCompare); neither answers "what is
// nephele_route_operations_total{operation="create"} in this registry now", which is
// what a test of a controller whose metrics are private needs. Use testutil where it
// fits, and Value where a test has only the registry.
package metrictest
