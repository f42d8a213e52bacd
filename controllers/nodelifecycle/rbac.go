package nodelifecycle

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// rbac is what the controller's client requests (sync.go), for Spec: deploy/render
// grants exactly these, so a new request here needs its rule here.
func rbac() []manager.RBACRule {
	return []manager.RBACRule{
		{Resource: "nodes", Verbs: []string{"patch"}, Why: "cloud-node-lifecycle-controller adds and removes the shutdown taint (controllers/nodelifecycle/sync.go)"},
		{Resource: "nodes", Verbs: []string{"delete"}, Why: "cloud-node-lifecycle-controller deletes the Node of an instance the cloud confirms gone (controllers/nodelifecycle/sync.go)"},
	}
}

// informedResources are the shared informers New registers (controller.go).
func informedResources() []schema.GroupResource {
	return []schema.GroupResource{{Resource: "nodes"}}
}
