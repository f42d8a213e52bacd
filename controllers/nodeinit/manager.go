package nodeinit

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// Spec returns the manager's description of the cloud-node-controller.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.CloudNodeController,
		Aliases:    []string{"cloud-node"},
		ClientName: "node-controller", // upstream's service account for --use-service-account-credentials
		// What the controller's client requests (sync.go): deploy/render grants exactly
		// these, so a new request there needs its rule here.
		RBAC: []manager.RBACRule{
			{Resource: "nodes", Verbs: []string{"get"}, Why: "cloud-node-controller re-reads a Node whose patch conflicted (controllers/nodeinit/sync.go)"},
			{Resource: "nodes", Verbs: []string{"patch"}, Why: "cloud-node-controller sets the provider ID, labels and removes the uninitialized taint (controllers/nodeinit/sync.go)"},
			{Resource: "nodes/status", Verbs: []string{"patch"}, Why: "cloud-node-controller sets the Node's addresses (controllers/nodeinit/sync.go)"},
		},
		Informers: []schema.GroupResource{{Resource: "nodes"}}, // what New registers (controller.go)
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			instances, err := cc.Instances()
			if err != nil {
				return nil, err
			}
			return New(Config{
				Ownership:             cc.Config.Ownership,
				ControllerDeps:        cc.ControllerDeps,
				Instances:             instances,
				Inventory:             cc.Inventory,
				StatusUpdateFrequency: cc.Config.NodeStatusUpdateFrequency,
				Workers:               cc.Config.ConcurrentNodeSyncs,
				StatusWorkers:         cc.Config.ConcurrentNodeStatusUpdates,
			})
		},
	}
}
