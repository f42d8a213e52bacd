package fakecloud

import (
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// Call is one finished call in the call log.
type Call struct {
	// Op is the operation called.
	Op cloud.Operation
	// Subject is what the call was about; see Hook for what it holds per operation.
	Subject string
	// Start is when the call entered the cloud, before any injected fault.
	Start time.Time
	// Duration is how long the call took, faults included.
	Duration time.Duration
	// Err is what the call returned.
	Err error
}

// Result classifies the call's error as the manager's metrics do.
func (c Call) Result() cloud.Result { return cloud.Classify(c.Err) }

// callLog counts and records calls. It is guarded by Cloud.mu.
type callLog struct {
	started  map[cloud.Operation]int
	results  map[cloud.Operation]map[cloud.Result]int
	total    int
	log      []Call
	inFlight int
}

func newCallLog() callLog {
	return callLog{started: map[cloud.Operation]int{}, results: map[cloud.Operation]map[cloud.Result]int{}}
}

func (l *callLog) start(op cloud.Operation) {
	l.started[op]++
	l.total++
	l.inFlight++
}

func (l *callLog) finish(c Call, limit int) {
	l.inFlight--
	r := l.results[c.Op]
	if r == nil {
		r = map[cloud.Result]int{}
		l.results[c.Op] = r
	}
	r[c.Result()]++
	l.log = append(l.log, c)
	// Trim in batches so that appending stays amortized O(1).
	if limit > 0 && len(l.log) >= 2*limit {
		l.log = append([]Call(nil), l.log[len(l.log)-limit:]...)
	}
}

// Calls returns how many calls of op have started (finished or not) since the last
// ResetCalls. Counting at the start lets a test wait until a hanging call is in.
// AnyOp counts every operation.
func (c *Cloud) Calls(op cloud.Operation) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op == AnyOp {
		return c.calls.total
	}
	return c.calls.started[op]
}

// CallsWithResult returns how many calls of op have finished with result since the
// last ResetCalls. AnyOp counts every operation.
func (c *Cloud) CallsWithResult(op cloud.Operation, result cloud.Result) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op != AnyOp {
		return c.calls.results[op][result]
	}
	n := 0
	for _, r := range c.calls.results {
		n += r[result]
	}
	return n
}

// TotalCalls returns how many calls of any operation have started since the last
// ResetCalls.
func (c *Cloud) TotalCalls() int { return c.Calls(AnyOp) }

// InFlight returns how many calls have started and not yet returned.
func (c *Cloud) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls.inFlight
}

// CallLog returns the finished calls in the order they finished, at most the last
// Options.CallLogLimit of them (and up to twice that many before the log is trimmed).
func (c *Cloud) CallLog() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls.log...)
}

// ResetCalls zeroes the counters and empties the call log. Calls in flight are counted
// in the new log when they finish.
func (c *Cloud) ResetCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	inFlight := c.calls.inFlight
	c.calls = newCallLog()
	c.calls.inFlight = inFlight
}
