package api

import "strings"

// Operation names. Every API call belongs to exactly one; fault rules select calls by
// operation and /metrics counts calls per operation.
const (
	OpInstancesCreate    = "instances.create"
	OpInstancesGet       = "instances.get"
	OpInstancesList      = "instances.list"
	OpInstancesStop      = "instances.stop"
	OpInstancesStart     = "instances.start"
	OpInstancesTerminate = "instances.terminate"
	OpInstancesDelete    = "instances.delete"
	OpInstancesConsole   = "instances.console"

	OpLBEnsure = "lb.ensure"
	OpLBUpdate = "lb.update"
	OpLBDelete = "lb.delete"
	OpLBGet    = "lb.get"
	OpLBList   = "lb.list"

	OpRoutesList   = "routes.list"
	OpRoutesCreate = "routes.create"
	OpRoutesDelete = "routes.delete"
	// OpRoutesApply deletes and creates many routes of a cluster in one call
	// (RouteChanges), as a cloud that programs its route table as one object does.
	OpRoutesApply = "routes.apply"

	OpVolumesCreate = "volumes.create"
	OpVolumesGet    = "volumes.get"
	OpVolumesList   = "volumes.list"
	OpVolumesDelete = "volumes.delete"
	OpVolumesAttach = "volumes.attach"
	OpVolumesDetach = "volumes.detach"
	OpVolumesExpand = "volumes.expand"
)

// Operations returns every operation name, grouped by resource.
func Operations() []string {
	return []string{
		OpInstancesCreate, OpInstancesGet, OpInstancesList, OpInstancesStop,
		OpInstancesStart, OpInstancesTerminate, OpInstancesDelete, OpInstancesConsole,
		OpLBEnsure, OpLBUpdate, OpLBDelete, OpLBGet, OpLBList,
		OpRoutesList, OpRoutesCreate, OpRoutesDelete, OpRoutesApply,
		OpVolumesCreate, OpVolumesGet, OpVolumesList, OpVolumesDelete,
		OpVolumesAttach, OpVolumesDetach, OpVolumesExpand,
	}
}

// IsOperation reports whether op is one of Operations.
func IsOperation(op string) bool {
	for _, o := range Operations() {
		if o == op {
			return true
		}
	}
	return false
}

// ValidOperationPattern reports whether p can select operations in a fault rule: an
// operation name ("lb.ensure"), every operation of a resource ("lb.*"), or everything
// ("*").
func ValidOperationPattern(p string) bool {
	if p == "*" || IsOperation(p) {
		return true
	}
	group, ok := strings.CutSuffix(p, ".*")
	if !ok || group == "" {
		return false
	}
	for _, o := range Operations() {
		if strings.HasPrefix(o, group+".") {
			return true
		}
	}
	return false
}

// MatchOperation reports whether pattern selects op and, if so, how specifically:
// 3 for an exact name, 2 for "group.*", 1 for "*"; 0 means no match.
func MatchOperation(pattern, op string) int {
	switch {
	case pattern == op:
		return 3
	case pattern == "*":
		return 1
	}
	if group, ok := strings.CutSuffix(pattern, ".*"); ok && strings.HasPrefix(op, group+".") {
		return 2
	}
	return 0
}
