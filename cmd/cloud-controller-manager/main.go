// Command cloud-controller-manager is nephele's cloud-controller-manager with the local
// cloud's provider built in: the manager's full, upstream-compatible flag set, the four
// cloud controllers, and --cloud-provider=local.
//
//	cloud-controller-manager --cloud-provider=local --cloud-config=/etc/nephele/local.yaml \
//	    --kubeconfig=/etc/kubernetes/ccm.kubeconfig --cluster-cidr=10.244.0.0/16
//
// See docs/providers/local.md for the cloud config and docs/manager.md for the flags.
package main

import (
	"fmt"
	"os"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

func main() {
	registry := cloud.NewRegistry()
	if err := local.Register(registry); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	os.Exit(manager.Execute(manager.NewCommand("cloud-controller-manager", registry, controllers.Default())))
}
