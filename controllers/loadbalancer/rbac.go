package loadbalancer

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// rbac is what the controller's client requests (sync.go), for Spec: deploy/render
// grants exactly these, so a new request here needs its rule here.
func rbac() []manager.RBACRule {
	return []manager.RBACRule{
		{Resource: "services", Verbs: []string{"get"}, Why: "service-lb-controller reads the live Service before deleting its load balancer (controllers/loadbalancer/sync.go)"},
		{Resource: "services", Verbs: []string{"patch"}, Why: "service-lb-controller adds and removes the load-balancer-cleanup finalizer (controllers/loadbalancer/sync.go)"},
		{Resource: "services/status", Verbs: []string{"patch"}, Why: "service-lb-controller writes status.loadBalancer (controllers/loadbalancer/sync.go)"},
	}
}

// informedResources are the shared informers New registers (controller.go): the Services it
// balances and the Nodes behind them.
func informedResources() []schema.GroupResource {
	return []schema.GroupResource{{Resource: "nodes"}, {Resource: "services"}}
}
