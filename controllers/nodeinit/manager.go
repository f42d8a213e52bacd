package nodeinit

import (
	"context"

	"github.com/nephele-dev/nephele/manager"
)

// Spec returns the manager's description of the cloud-node-controller.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.CloudNodeController,
		Aliases:    []string{"cloud-node"},
		ClientName: "node-controller", // upstream's service account for --use-service-account-credentials
		RBAC:       rbac(),
		Informers:  informedResources(),
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			instances, err := cc.Instances()
			if err != nil {
				return nil, err
			}
			return New(Config{
				Client:                cc.Client,
				Informers:             cc.Informers,
				Instances:             instances,
				Inventory:             cc.Inventory,
				Recorder:              cc.Recorder,
				Logger:                cc.Logger,
				Metrics:               cc.Metrics,
				Health:                cc.Health,
				StatusUpdateFrequency: cc.Config.NodeStatusUpdateFrequency,
				Workers:               cc.Config.ConcurrentNodeSyncs,
			})
		},
	}
}
