// Package localtest exercises the local cloud for nephele's conformance suite: it makes
// test instances through the local cloud's API and induces faults with its knobs. Both
// `nephele conformance --provider local` and the provider's own conformance test use it;
// it is kept out of the provider package so that no test code ships in a CCM binary.
package localtest
