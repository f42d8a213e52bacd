package render

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
)

// TestDeletingSharedAccountKeepsKubeControllerManager: kube-system/node-controller is
// both a rendered account and kube-controller-manager's own under its
// --use-service-account-credentials. When `kubectl delete -f` deletes it, the real
// kube-controller-manager gets or creates it again and its node-lifecycle-controller
// keeps writing Nodes (docs/deploy.md, "The controllers' service accounts are rendered").
func TestDeletingSharedAccountKeepsKubeControllerManager(t *testing.T) {
	env := testenv.New(t, controlplane.Options{
		ControllerManager: true,
		ControllerManagerArgs: []string{
			"--use-service-account-credentials=true",
			"--controllers=node-lifecycle-controller",
			// A Node without a kubelet is tainted unreachable after these, as node-controller.
			"--node-monitor-period=1s", "--node-monitor-grace-period=5s", "--node-startup-grace-period=5s",
		},
	})
	ctx := t.Context()
	sas := env.Client.CoreV1().ServiceAccounts(ControllerServiceAccountNamespace)
	const account = "node-controller"

	// Only kube-controller-manager's node-lifecycle-controller taints a Node that never
	// reported, and it does so as node-controller.
	unreachable := func(name string) (time.Duration, error) {
		start := time.Now()
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("create Node %s: %w", name, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }), nil
		})
		if err != nil {
			return 0, fmt.Errorf("Node %s not tainted %s by kube-controller-manager: %w", name, corev1.TaintNodeUnreachable, err)
		}
		return time.Since(start), nil
	}
	took, err := unreachable("before")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the delete: Node tainted after %v", took.Round(time.Millisecond))
	before, err := sas.Get(ctx, account, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kube-controller-manager made no %s/%s: %v", ControllerServiceAccountNamespace, account, err)
	}

	// What `kubectl delete -f` of the rendering does to it.
	if err := sas.Delete(ctx, account, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	took, err = unreachable("after")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the delete: Node tainted after %v", took.Round(time.Millisecond))
	// kube-controller-manager makes the account again when its cached token is refused
	// and it asks for a new one, which may take a while after the delete; that it keeps
	// working (above) is what a user relies on, so this is reported, not required.
	sa, err := sas.Get(ctx, account, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Logf("%s not made again yet, %v after its deletion", account, time.Since(deleted).Round(time.Millisecond))
	case err != nil:
		t.Fatal(err)
	case sa.UID == before.UID:
		t.Fatalf("%s has its old UID %s: it was not deleted", account, sa.UID)
	default:
		t.Logf("%s made again (new UID) within %v of its deletion", account, time.Since(deleted).Round(time.Millisecond))
	}
}
