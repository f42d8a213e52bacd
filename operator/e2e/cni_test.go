package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/localcluster"
)

// cniConflist is a node's CNI configuration, under its host directory (kubenode's
// Paths.CNIConflist).
func cniConflist(cfg localcluster.Config, n localcluster.Node) string {
	return filepath.Join(cfg.Dir, "hosts", n.InstanceID, "node", "cni", "net.d", "10-nephele.conflist")
}

// removeCNI takes every node's CNI configuration away, as on nodes no CNI has been
// installed on yet, and waits until every Node is NotReady for it. It returns what it
// removed, for restoreCNI.
func removeCNI(t *testing.T, c *localcluster.Cluster, cfg localcluster.Config, cl client.Client) map[string][]byte {
	t.Helper()
	saved := map[string][]byte{}
	for _, n := range c.Nodes {
		path := cniConflist(cfg, n)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		saved[path] = data
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "every Node NotReady without a CNI", func(ctx context.Context) error {
		return nodesReady(ctx, cl, corev1.ConditionFalse)
	})
	return saved
}

// restoreCNI puts the configurations back and waits until every Node is Ready.
func restoreCNI(t *testing.T, cl client.Client, saved map[string][]byte) {
	t.Helper()
	for path, data := range saved {
		writeFile(t, path, data)
	}
	within(t, "every Node Ready with its CNI back", func(ctx context.Context) error {
		return nodesReady(ctx, cl, corev1.ConditionTrue)
	})
}

func nodesReady(ctx context.Context, cl client.Client, want corev1.ConditionStatus) error {
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != want {
				return fmt.Errorf("node %s Ready=%s: %s", n.Name, cond.Status, cond.Message)
			}
		}
	}
	return nil
}
