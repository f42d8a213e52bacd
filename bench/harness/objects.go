package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// newNode is a Node as a kubelet with --cloud-provider=external registers it: tainted
// uninitialized, without a provider ID, its pod CIDR allocated, and its InternalIP (the
// instance's, as a kubelet given --node-ip reports it) and host name in status.
func newNode(name, cidr, address string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name, "bench.nephele.dev/node": "true"},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:  cidr,
			PodCIDRs: []string{cidr},
			Taints:   []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: address},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
}

// newService is a LoadBalancer Service with one TCP port.
func newService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: servicePort, TargetPort: intstr.FromInt32(servicePort),
			}},
		},
	}
}

// createNodes creates the named nodes at once and returns when each create was sent.
// A node's status is written with its create: the apiserver keeps a new Node's status.
func createNodes(ctx context.Context, kube kubernetes.Interface, names []string, cidrs []string, addrs map[string]string) (map[string]time.Time, error) {
	sent := make(map[string]time.Time, len(names))
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, name := range names {
		g.Go(func() error {
			addr, ok := addrs[name]
			if !ok {
				return fmt.Errorf("node %s has no instance", name)
			}
			at := time.Now()
			if _, err := kube.CoreV1().Nodes().Create(ctx, newNode(name, cidrs[i], addr), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating node %s: %w", name, err)
			}
			mu.Lock()
			sent[name] = at
			mu.Unlock()
			return nil
		})
	}
	return sent, g.Wait()
}

// createServices creates the named Services at once and returns when each create was
// sent and each one's load balancer name.
func createServices(ctx context.Context, kube kubernetes.Interface, names []string) (sent map[string]time.Time, lbNames map[string]string, err error) {
	sent = make(map[string]time.Time, len(names))
	lbNames = make(map[string]string, len(names))
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, name := range names {
		g.Go(func() error {
			at := time.Now()
			svc, err := kube.CoreV1().Services(namespace).Create(ctx, newService(name), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating service %s: %w", name, err)
			}
			mu.Lock()
			key := namespace + "/" + name
			sent[key] = at
			lbNames[key] = cloudprovider.DefaultLoadBalancerName(svc)
			mu.Unlock()
			return nil
		})
	}
	return sent, lbNames, g.Wait()
}

// ensureNamespace creates the benchmark's namespace.
func ensureNamespace(ctx context.Context, kube kubernetes.Interface) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	return nil
}
