package route

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nephele-dev/nephele/manager"
)

// ErrNoClusterCIDR is returned (wrapped) by Spec's New when routes are to be configured
// but no cluster CIDR is set: the controller could not tell its routes from others'.
var ErrNoClusterCIDR = errors.New("no cluster CIDR")

// Spec returns the manager's description of the node-route-controller. Its New declines
// (manager.Disabled) when --configure-cloud-routes is false or the provider has no
// routes, and fails with one clear message when routes are on but --cluster-cidr is not
// set, instead of upstream's fatal exit at every restart.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.NodeRouteController,
		Aliases:    []string{"route", "route-controller"}, // route-controller: upstream's default migration config
		ClientName: "route-controller",                    // upstream's service account for --use-service-account-credentials
		// What the controller's client requests (condition.go): deploy/render grants exactly
		// these, so a new request there needs its rule here.
		RBAC: []manager.RBACRule{
			{Resource: "nodes/status", Verbs: []string{"patch"}, Why: "node-route-controller sets the NetworkUnavailable condition (controllers/route/condition.go)"},
		},
		Informers: []schema.GroupResource{{Resource: "nodes"}}, // what New registers (controller.go)
		New:       newFromContext,
	}
}

func newFromContext(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
	if !cc.Config.ConfigureCloudRoutes {
		return nil, manager.Disabled("--configure-cloud-routes is false")
	}
	routes, ok := cc.Cloud.Routes()
	if !ok {
		return nil, manager.Disabled("cloud provider %q does not support routes", cc.Cloud.ProviderName())
	}
	if len(cc.Config.ClusterCIDRs) == 0 {
		return nil, fmt.Errorf("%s: %w: cloud provider %q configures routes and --configure-cloud-routes is true, "+
			"so the pod network must be known: set --cluster-cidr to the cluster's pod CIDR(s), "+
			"or set --configure-cloud-routes=false if the network plugin routes pod traffic itself",
			manager.NodeRouteController, ErrNoClusterCIDR, cc.Cloud.ProviderName())
	}
	return New(Config{
		Ownership:            cc.Config.Ownership,
		ControllerDeps:       cc.ControllerDeps,
		Routes:               routes,
		ClusterName:          cc.Config.ClusterName,
		ClusterCIDRs:         cc.Config.ClusterCIDRs,
		ConcurrentRouteSyncs: cc.Config.ConcurrentRouteSyncs,
		ReconcilePeriod:      cc.Config.RouteReconciliationPeriod,
	})
}
