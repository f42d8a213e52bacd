// Package keylock serializes work per key (an instance, a load balancer) while work on
// different keys runs in parallel: the local cloud's answer to one lock per object
// without a map that grows with every object ever seen.
package keylock
