package route

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// rbac is what the controller's client requests (condition.go), for Spec:
// deploy/render grants exactly these, so a new request here needs its rule here.
func rbac() []manager.RBACRule {
	return []manager.RBACRule{
		{Resource: "nodes/status", Verbs: []string{"patch"}, Why: "node-route-controller sets the NetworkUnavailable condition (controllers/route/condition.go)"},
	}
}

// informedResources are the shared informers New registers (controller.go).
func informedResources() []schema.GroupResource {
	return []schema.GroupResource{{Resource: "nodes"}}
}
