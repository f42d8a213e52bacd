// Package faults injects the local cloud's misbehaviour: latency (fixed, uniform or
// normal), a random error rate, token-bucket throttling, outages, not-implemented
// answers and eventual consistency, selected per API operation. An Injector holds the
// rules, changeable at run time, and decides for each call what happens to it; the
// server carries the decision out.
//
// Randomness comes from one seeded generator, so a test that makes the same calls in
// the same order sees the same faults.
package faults
