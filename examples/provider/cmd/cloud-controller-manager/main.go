// Command cloud-controller-manager is the example cloud's cloud-controller-manager:
// nephele's manager with the four cloud controllers and the example provider built in.
//
//	cloud-controller-manager --cloud-provider=example --cloud-config=/etc/example/cloud.json \
//	    --kubeconfig=/etc/kubernetes/ccm.kubeconfig --cluster-name=prod
//
// Every flag of the upstream cloud-controller-manager is accepted; see docs/ccm.md.
package main

import (
	"fmt"
	"os"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"

	"example.com/cloud-provider-example/provider"
)

func main() {
	registry := cloud.NewRegistry()
	if err := provider.Register(registry); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	os.Exit(manager.Execute(manager.NewCommand("cloud-controller-manager", registry, controllers.Default())))
}
