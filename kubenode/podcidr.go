package kubenode

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podCIDRPoll is how often the runtime reads its Node while it waits for a pod CIDR, and
// podCIDRRecheck how often afterwards, in case the Node was deleted and registered again
// with another range.
const (
	podCIDRPoll    = 250 * time.Millisecond
	podCIDRRecheck = 10 * time.Second
	// podCIDRNag is how often a wait that lasts is logged.
	podCIDRNag = 30 * time.Second
)

// podCIDR returns the Node's spec.podCIDR, "" while it has none (or is not registered).
func podCIDR(ctx context.Context, client kubernetes.Interface, node string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get node %s: %w", node, err)
	}
	return n.Spec.PodCIDR, nil
}
