package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/upstream"
)

var shared = testenv.Shared{}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane starts the package's control plane on first use. A missing binary fails
// the test: integration tests never skip.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

// initializing is upstream's fake cloud with an Initialize that uses the client
// builder as real providers do: it lists Nodes with a client from ClientOrDie.
type initializing struct {
	*upstreamfake.Cloud
	mu        sync.Mutex
	listedErr error
	listed    bool
}

func (c *initializing) Initialize(b cloudprovider.ControllerClientBuilder, _ <-chan struct{}) {
	_, err := b.ClientOrDie("upstream-fake").CoreV1().Nodes().List(context.Background(), metav1.ListOptions{Limit: 1})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listed, c.listedErr = true, err
}

// TestManagerInitializesNodes runs nephele's manager in-process with upstream's fake
// cloud behind the adapter, and checks that cloud-node-controller initializes Nodes
// on a real kube-apiserver from the upstream provider's answers.
func TestManagerInitializesNodes(t *testing.T) {
	e := controlPlane(t)
	names := []string{"upstream-n1", "upstream-n2"}
	f := newUpstreamFake(true, nil)
	for _, n := range names {
		f.ProviderID[types.NodeName(n)] = "fake://i-" + n
		f.InstanceTypes[types.NodeName("fake://i-"+n)] = fakeType
	}
	up := &initializing{Cloud: f}
	reg := cloud.NewRegistry()
	if err := reg.Register("fake", upstream.Factory(func(io.Reader) (cloudprovider.Interface, error) { return up, nil })); err != nil {
		t.Fatal(err)
	}
	// The manager runs through its Go entry point with the same flags a binary takes;
	// NewCommand would also set klog's global logger, which the test's clients use.
	specs := controllers.Default()
	o := manager.NewOptions()
	fs := pflag.NewFlagSet("upstream-ccm", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--cloud-provider=fake", "--kubeconfig=" + e.Kubeconfig, "--secure-port=0",
		"--leader-elect=false", "--controllers=cloud-node-controller"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Complete(specs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), testlog.New(t, 2)))
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, cfg, reg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the manager stopped with %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the manager did not stop within a minute")
		}
	})

	for _, n := range names {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule},
			}},
		}
		if _, err := e.Client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", n, err)
		}
		t.Cleanup(func() { _ = e.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}

	for _, n := range names {
		var node *corev1.Node
		poll.Within(t, 2*time.Minute, "node "+n+" to be initialized", func() error {
			var err error
			if node, err = e.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
				return errors.New(describeNode(node))
			}
			return nil
		})
		want := map[string]string{
			"topology.kubernetes.io/zone":      fakeZone,
			"topology.kubernetes.io/region":    fakeRegion,
			"node.kubernetes.io/instance-type": fakeType,
			"example.com/hosted-by":            "nephele",
		}
		for k, v := range want {
			if node.Labels[k] != v {
				t.Errorf("node %s label %s = %q, want %q", n, k, node.Labels[k], v)
			}
		}
		if node.Spec.ProviderID != "fake://i-"+n {
			t.Errorf("node %s provider ID %q, want fake://i-%s", n, node.Spec.ProviderID, n)
		}
		if !slices.Contains(node.Status.Addresses, f.Addresses[0]) {
			t.Errorf("node %s addresses %v lack the cloud's %v", n, node.Status.Addresses, f.Addresses[0])
		}
	}

	up.mu.Lock()
	defer up.mu.Unlock()
	if !up.listed || up.listedErr != nil {
		t.Errorf("the provider's Initialize listed nodes: %v, error %v; want a working client", up.listed, up.listedErr)
	}
}

func describeNode(n *corev1.Node) string {
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key)
	}
	return fmt.Sprintf("providerID %q, taints %v, labels %v", n.Spec.ProviderID, strings.Join(taints, ","), n.Labels)
}
