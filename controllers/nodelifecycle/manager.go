package nodelifecycle

import (
	"context"

	"github.com/nephele-dev/nephele/manager"
)

// Spec returns the manager's description of the cloud-node-lifecycle-controller.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.CloudNodeLifecycleController,
		Aliases:    []string{"cloud-node-lifecycle"},
		ClientName: "node-controller", // upstream's service account for --use-service-account-credentials
		RBAC:       rbac(),
		Informers:  informedResources(),
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			instances, err := cc.Instances()
			if err != nil {
				return nil, err
			}
			return New(Config{
				Client:              cc.Client,
				Informers:           cc.Informers,
				Instances:           instances,
				Inventory:           cc.Inventory,
				Recorder:            cc.Recorder,
				Logger:              cc.Logger,
				Metrics:             cc.Metrics,
				Health:              cc.Health,
				MonitorPeriod:       cc.Config.NodeMonitorPeriod,
				DeletionGracePeriod: cc.Config.NodeDeletionGracePeriod,
				SafeModeThreshold:   cc.Config.NodeDeletionSafeModeThreshold,
				Workers:             cc.Config.ConcurrentNodeSyncs,
			})
		},
	}
}
