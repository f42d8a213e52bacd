// Package poll is how nephele's tests wait: a test names what it waits for and gives a
// condition that returns nil once it holds, or an error that says what it saw instead;
// poll calls the condition until it holds or a deadline passes, then fails the test
// with the name and the condition's last answer.
//
// It replaces a dozen private eventually/waitFor/poll helpers with six signatures. One
// shape for conditions (func() error) means every timeout message carries the last
// observation, not just "timed out". Deadlines are generous (Timeout) because the tests
// must pass on a loaded two-core machine; a test whose assertion is the deadline itself
// (a follower takes over within a lease duration) says so with Within.
//
// Waiting never sleeps a fixed time: the interval starts at 5ms and doubles up to
// 100ms, so a condition that holds at once costs nothing and a slow one does not
// hammer the API server. A test that must sample something at a fixed rate (is it still
// idle?) samples inside its condition; the number of calls is not part of the contract.
package poll
