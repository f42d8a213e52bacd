package loadbalancer

import (
	"context"

	"github.com/nephele-dev/nephele/manager"
)

// Spec returns the manager's description of the controller. It declines to run when
// the provider has no load balancers.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.ServiceLBController,
		Aliases:    []string{"service", "service-controller"}, // service-controller: upstream's default migration config
		ClientName: "service-controller",                      // upstream's service account for --use-service-account-credentials
		RBAC:       rbac(),
		Informers:  informedResources(),
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			if cc.Cloud == nil {
				return nil, manager.Disabled("no cloud provider")
			}
			lbs, ok := cc.Cloud.LoadBalancers()
			if !ok {
				return nil, manager.Disabled("provider %q has no load balancers", cc.Cloud.ProviderName())
			}
			return New(Config{
				Client:            cc.Client,
				Informers:         cc.Informers,
				LoadBalancers:     lbs,
				Recorder:          cc.Recorder,
				Logger:            cc.Logger,
				Metrics:           cc.Metrics,
				Health:            cc.Health,
				ClusterName:       cc.Config.ClusterName,
				LoadBalancerClass: cc.Config.LoadBalancerClass,
				Workers:           cc.Config.ConcurrentServiceSyncs,
				NodeBatchWindow:   cc.Config.NodeBatchWindow,
			})
		},
	}
}
