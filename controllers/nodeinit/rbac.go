package nodeinit

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// rbac is what the controller's client requests (sync.go), for Spec: deploy/render
// grants exactly these, so a new request here needs its rule here.
func rbac() []manager.RBACRule {
	return []manager.RBACRule{
		{Resource: "nodes", Verbs: []string{"get"}, Why: "cloud-node-controller re-reads a Node whose patch conflicted (controllers/nodeinit/sync.go)"},
		{Resource: "nodes", Verbs: []string{"patch"}, Why: "cloud-node-controller sets the provider ID, labels and removes the uninitialized taint (controllers/nodeinit/sync.go)"},
		{Resource: "nodes/status", Verbs: []string{"patch"}, Why: "cloud-node-controller sets the Node's addresses (controllers/nodeinit/sync.go)"},
	}
}

// informedResources are the shared informers New registers (controller.go).
func informedResources() []schema.GroupResource {
	return []schema.GroupResource{{Resource: "nodes"}}
}
