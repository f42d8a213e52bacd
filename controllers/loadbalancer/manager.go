package loadbalancer

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// Spec returns the manager's description of the controller. It declines to run when
// the provider has no load balancers.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.ServiceLBController,
		Aliases:    []string{"service", "service-controller"}, // service-controller: upstream's default migration config
		ClientName: "service-controller",                      // upstream's service account for --use-service-account-credentials
		// What the controller's client requests (sync.go): deploy/render grants exactly
		// these, so a new request there needs its rule here.
		RBAC: []manager.RBACRule{
			{Resource: "services", Verbs: []string{"get"}, Why: "service-lb-controller reads the live Service before deleting its load balancer (controllers/loadbalancer/sync.go)"},
			{Resource: "services", Verbs: []string{"patch"}, Why: "service-lb-controller adds and removes the load-balancer-cleanup finalizer (controllers/loadbalancer/sync.go)"},
			{Resource: "services/status", Verbs: []string{"patch"}, Why: "service-lb-controller writes status.loadBalancer (controllers/loadbalancer/sync.go)"},
		},
		Informers: []schema.GroupResource{{Resource: "nodes"}, {Resource: "services"}}, // what New registers (controller.go)
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			if cc.Cloud == nil {
				return nil, manager.Disabled("no cloud provider")
			}
			lbs, ok := cc.Cloud.LoadBalancers()
			if !ok {
				return nil, manager.Disabled("provider %q has no load balancers", cc.Cloud.ProviderName())
			}
			return New(Config{
				Ownership:         cc.Config.Ownership,
				ControllerDeps:    cc.ControllerDeps,
				LoadBalancers:     lbs,
				ClusterName:       cc.Config.ClusterName,
				LoadBalancerClass: cc.Config.LoadBalancerClass,
				ServeUnclassed:    cc.Config.ServeUnclassed,
				Workers:           cc.Config.ConcurrentServiceSyncs,
				NodeBatchWindow:   cc.Config.NodeBatchWindow,
			})
		},
	}
}
