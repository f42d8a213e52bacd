package manager

import (
	"os"
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the garbage collector's target (GOGC) the manager's command runs
// with when the GOGC environment variable is unset; Go's own default is 100.
//
// Why: most of a manager's heap is its informer caches, which live as long as the
// process, and a burst (thousands of joining nodes, a backend update of every load
// balancer) adds short-lived request data on top. At GOGC=100 the heap may grow to
// twice what was live at the last collection, so a burst's peak resident set is about
// twice the live heap; at 50 it is about one and a half times. The controllers spend
// little CPU (in the large benchmark, about a tenth of upstream's over the same run),
// so collecting twice as often is cheap, while the memory limit a cluster operator
// must set is what the peak costs. GOGC (and GOMEMLIMIT) set in the environment win,
// as for any Go program.
const DefaultGCPercent = 50

// gcPercent returns the GOGC the command sets and true, or false when the environment
// sets GOGC and the runtime already follows it.
func gcPercent(lookup func(string) (string, bool)) (int, bool) {
	if _, set := lookup("GOGC"); set {
		return 0, false
	}
	return DefaultGCPercent, true
}

// tuneGC applies DefaultGCPercent unless GOGC is set, and returns the target in effect
// (as the runtime reads GOGC: a number or "off") for the start-up log.
func tuneGC() string {
	if p, ok := gcPercent(os.LookupEnv); ok {
		debug.SetGCPercent(p)
		return strconv.Itoa(p)
	}
	return os.Getenv("GOGC") + " (from GOGC)"
}
