// Package store keeps the local cloud's durable state in one bbolt file: instances
// (with a name index), load balancers (with a VIP index) and routes per cluster. Every
// change is one bbolt transaction, so a request is either fully written or not at all,
// and everything survives a restart. Open reads every page once under a recover (and
// with memory faults made panics), because bbolt panics on pages it cannot decode: a
// corrupt file is a *CorruptError naming it and the way out, not a crash.
//
// The store checks only what needs the stored state (name and VIP uniqueness, route
// conflicts, route targets); request validation is the api package's job.
package store
