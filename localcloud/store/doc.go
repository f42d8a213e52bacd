// Package store keeps the local cloud's durable state in one bbolt file: instances
// (with a name index), load balancers (with a VIP index) and routes per cluster. Every
// change is one bbolt transaction, so a request is either fully written or not at all,
// and everything survives a restart.
//
// The store checks only what needs the stored state (name and VIP uniqueness, route
// conflicts, route targets); request validation is the api package's job.
package store
