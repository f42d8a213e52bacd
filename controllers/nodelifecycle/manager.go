package nodelifecycle

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// Spec returns the manager's description of the cloud-node-lifecycle-controller.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.CloudNodeLifecycleController,
		Aliases:    []string{"cloud-node-lifecycle"},
		ClientName: "node-controller", // upstream's service account for --use-service-account-credentials
		// What the controller's client requests (sync.go): deploy/render grants exactly
		// these, so a new request there needs its rule here.
		RBAC: []manager.RBACRule{
			{Resource: "nodes", Verbs: []string{"patch"}, Why: "cloud-node-lifecycle-controller adds and removes the shutdown taint (controllers/nodelifecycle/sync.go)"},
			{Resource: "nodes", Verbs: []string{"delete"}, Why: "cloud-node-lifecycle-controller deletes the Node of an instance the cloud confirms gone (controllers/nodelifecycle/sync.go)"},
		},
		Informers: []schema.GroupResource{{Resource: "nodes"}}, // what New registers (controller.go)
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			instances, err := cc.Instances()
			if err != nil {
				return nil, err
			}
			return New(Config{
				Ownership:           cc.Config.Ownership,
				ControllerDeps:      cc.ControllerDeps,
				Instances:           instances,
				Inventory:           cc.Inventory,
				MonitorPeriod:       cc.Config.NodeMonitorPeriod,
				DeletionGracePeriod: cc.Config.NodeDeletionGracePeriod,
				SafeModeThreshold:   cc.Config.NodeDeletionSafeModeThreshold,
				Workers:             cc.Config.ConcurrentNodeSyncs,
			})
		},
	}
}
