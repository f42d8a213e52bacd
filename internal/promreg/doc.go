// Package promreg registers Prometheus collectors so that several controllers (or tests)
// built against one registry share their series instead of failing.
package promreg
