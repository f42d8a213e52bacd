// Package waitfor waits for a condition with a deadline: it calls the condition, backing
// off from 5ms to 100ms between calls, until it holds or the time is up, and then says
// what the condition last saw instead of only that the time ran out. Production code
// (localcluster, its smoke checks) waits with it; tests wait with internal/testkit/poll,
// which adds failing the test and shares this loop.
package waitfor
