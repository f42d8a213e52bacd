// Command nephele-operator manages a cluster's cloud-controller-manager (CCM) through
// the CloudControllerManager resource (operator.nephele.dev/v1alpha1):
//
//	nephele-operator run --operand-namespace kube-system        # the operator (in its Deployment)
//	nephele-operator render --platform local --out DIR ...      # static pods for a bootstrap node
//	nephele-operator manifests | kubectl apply -f -             # the operator's own objects
//
// See docs/operator.md.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "nephele-operator",
		Short:         "manage the cluster's cloud-controller-manager (docs/operator.md)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), newRenderCmd(), newManifestsCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
