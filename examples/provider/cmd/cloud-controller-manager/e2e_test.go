package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/controlplane"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInitializesNodes runs the binary against a real kube-apiserver (nephele's control
// plane, built by nephele's `make tools`) with a cloud config that creates two
// instances, and checks that it initializes their Nodes and stops cleanly on SIGTERM.
func TestInitializesNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	env, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})

	dir := t.TempDir()
	config := filepath.Join(dir, "cloud.json")
	cloudJSON := fmt.Sprintf(`{"region": "ex-e2e-1", "stateFile": %q, "instances": [
		{"name": "node-1", "zone": "ex-e2e-1a", "type": "ex.large"},
		{"name": "node-2", "tags": {"pool": "blue"}, "publicIP": "198.51.100.7"}]}`, filepath.Join(dir, "state.json"))
	if err := os.WriteFile(config, []byte(cloudJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	cmd := exec.Command(os.Args[0], "--cloud-provider=example", "--cloud-config="+config, "--kubeconfig="+env.Kubeconfig,
		"--secure-port=0", "--leader-elect=false", "--controllers=cloud-node-controller")
	cmd.Env = append(os.Environ(), asMain+"=1")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("cloud-controller-manager output:\n%s", out)
		}
	})

	nodes := env.Client.CoreV1().Nodes()
	for _, name := range []string{"node-1", "node-2"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		}}
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]struct {
		providerID string
		labels     map[string]string
		address    string
	}{
		"node-1": {"example://vm-000001", map[string]string{"topology.kubernetes.io/zone": "ex-e2e-1a", "topology.kubernetes.io/region": "ex-e2e-1", "node.kubernetes.io/instance-type": "ex.large"}, "10.0.0.1"},
		"node-2": {"example://vm-000002", map[string]string{"topology.kubernetes.io/zone": "ex-e2e-1a", "example.com/pool": "blue"}, "198.51.100.7"},
	}
	for name, w := range want {
		var n *corev1.Node
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if n, err = nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s still uninitialized after a minute", name)
			}
		}
		if n.Spec.ProviderID != w.providerID {
			t.Errorf("node %s: provider ID %q, want %q", name, n.Spec.ProviderID, w.providerID)
		}
		for k, v := range w.labels {
			if n.Labels[k] != v {
				t.Errorf("node %s: label %s=%q, want %q", name, k, n.Labels[k], v)
			}
		}
		if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == w.address }) {
			t.Errorf("node %s: addresses %v lack %s", name, n.Status.Addresses, w.address)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Errorf("after SIGTERM: %v, want a clean exit", err)
		}
	case <-time.After(time.Minute):
		t.Error("the cloud-controller-manager did not stop within a minute of SIGTERM")
	}
}
