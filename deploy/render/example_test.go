package render_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/manager"
)

// A provider whose binary runs a controller of its own beside nephele's passes the same
// specs to the rendering as to manager.NewCommand: the controller's spec declares the
// requests its client makes and the informers it registers, and the rendering grants
// them (here on the controller's own service account) and lists them with the code path
// of each.
func ExamplePermissionsTable() {
	zones := manager.ControllerSpec{
		Name:       "zone-label-controller",
		ClientName: "zone-label-controller",
		RBAC: []manager.RBACRule{{Resource: "nodes", Verbs: []string{"patch"},
			Why: "zone-label-controller labels each Node with its rack (zones/sync.go)"}},
		Informers: []schema.GroupResource{{Resource: "nodes"}},
		// New builds the controller; the rendering does not call it.
	}
	o := render.DefaultOptions()
	o.ControllerSpecs = append(controllers.Default(), zones)
	o.Controllers = []string{"zone-label-controller"}
	table, err := render.PermissionsTable(o)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(table)
	// Output:
	// | identity | role (scope) | resource | verbs | names | needed by |
	// |---|---|---|---|---|---|
	// | `kube-system/cloud-controller-manager` | `system:cloud-controller-manager` (cluster) | `nodes` | list, watch | all | the manager's shared informers, for zone-label-controller (manager/run.go) |
	// | `kube-system/cloud-controller-manager` | `system:cloud-controller-manager` (cluster) | `events` | create, patch | all | the manager's event broadcaster records every controller's Events, patching repeated ones (manager/run.go) |
	// | `kube-system/cloud-controller-manager` | `system:auth-delegator` (cluster) | `tokenreviews.authentication.k8s.io` | create | all | /metrics and /debug/pprof: the bearer token of a request is checked by the apiserver (manager/serving/auth.go) |
	// | `kube-system/cloud-controller-manager` | `system:auth-delegator` (cluster) | `subjectaccessreviews.authorization.k8s.io` | create | all | /metrics and /debug/pprof: the request's user is authorized by the apiserver (manager/serving/auth.go) |
	// | `kube-system/cloud-controller-manager` | `system::leader-locking-cloud-controller-manager` (namespace kube-system) | `leases.coordination.k8s.io` | get, update | cloud-controller-manager | leader election reads and renews the Lease, and releases it on exit (manager/lease.go) |
	// | `kube-system/cloud-controller-manager` | `system::leader-locking-cloud-controller-manager` (namespace kube-system) | `leases.coordination.k8s.io` | create | all | leader election creates the Lease the first time; create cannot be limited to a name (manager/lease.go) |
	// | `kube-system/cloud-controller-manager` | `system:cloud-controller-manager:controller-credentials` (namespace kube-system) | `serviceaccounts` | get | zone-label-controller | --use-service-account-credentials: the manager checks each controller's service account exists (manager/clients.go) |
	// | `kube-system/cloud-controller-manager` | `system:cloud-controller-manager:controller-credentials` (namespace kube-system) | `serviceaccounts/token` | create | zone-label-controller | --use-service-account-credentials: the manager requests each controller's token with the TokenRequest API (manager/clients.go) |
	// | `kube-system/zone-label-controller` | `system:controller:cloud-zone-label-controller` (cluster) | `nodes` | patch | all | zone-label-controller labels each Node with its rack (zones/sync.go) |
}
