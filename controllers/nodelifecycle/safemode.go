package nodelifecycle

import "math"

// round summarizes what one monitor round saw, for the safe-mode decision.
type round struct {
	// total is the number of Nodes in the cluster.
	total int
	// listingFailed is set when the inventory listing failed.
	listingFailed bool
	// lookups is how many not-Ready nodes were looked up (in the listing or one by one);
	// failed is how many of those lookups ended in an error other than NotFound.
	lookups, failed int
	// candidates is how many nodes the round would delete.
	candidates int
}

// allowedDeletions is how many Nodes one round may delete in a cluster of total Nodes:
// the threshold share, rounded down, but at least one so that small clusters work.
func allowedDeletions(threshold float64, total int) int {
	// The epsilon keeps 0.29*100 = 28.999999999999996 from rounding down to 28.
	return max(1, int(math.Floor(threshold*float64(total)+1e-9)))
}

// safeModeReason returns why the round must delete nothing, or "" when it may delete.
// A cloud that fails more than half of the lookups is not trusted with the rest: its
// NotFound answers may be part of the same failure.
func safeModeReason(threshold float64, r round) string {
	switch {
	case r.listingFailed, r.lookups > 0 && 2*r.failed > r.lookups:
		return SafeModeCloudErrors
	case r.candidates > allowedDeletions(threshold, r.total):
		return SafeModeTooManyDeletions
	}
	return ""
}
