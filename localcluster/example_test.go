package localcluster_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/localcluster"
)

// A real cluster of two nodes for a test or a tool: it needs root and bin/ (make tools
// build node-images). Without an Output comment the example is compiled, not run.
func ExampleStart() {
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Config{Dir: "/tmp/cluster", BinDir: "bin", Nodes: 2})
	if err != nil {
		fmt.Println(err) // a *localcluster.PreflightError says what the machine lacks
		return
	}
	defer c.Stop(context.WithoutCancel(ctx))
	nodes, err := c.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range nodes.Items {
		fmt.Println(n.Name, n.Spec.ProviderID, n.Spec.PodCIDR)
	}
}
