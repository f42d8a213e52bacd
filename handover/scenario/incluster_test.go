package scenario

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/witness"
	"github.com/nephele-dev/nephele/localcluster"
	"github.com/nephele-dev/nephele/providers/local"
)

// TestLeaderKillLoopInCluster is TestLeaderKillLoop with nephele installed in a cluster of
// real kubelets as users install it (localcluster's in-cluster mode: `nephele manifests`
// applied with kubectl, three replicas on three nodes): the leader's container is killed
// with SIGKILL and kubelet restarts it; the next kill waits until all three run again. The replicas run on the host network, one per
// node (the manifests' anti-affinity), so the witness in front of the cloud tells them
// apart by their node's address.
func TestLeaderKillLoopInCluster(t *testing.T) {
	hoststest.RequireRoot(t)
	bin := clustertest.BinDir(t)
	const class = "scenario.nephele.dev/in-cluster"
	c, dir := clustertest.Start(t, "nphkl", bin, 3, func(cfg *localcluster.Config) {
		cfg.CCM = localcluster.CCMInCluster
		cfg.CCMReplicas = 3
		cfg.DeferCCM = true
		cfg.CCMArgs = []string{"--leader-elect-lease-duration=" + leaseDuration.String(), "--leader-elect-renew-deadline=4s",
			"--leader-elect-retry-period=" + retryPeriod.String(), "--load-balancer-class=" + class, "--v=2"}
	})
	ctx := t.Context()

	// The witness: a recording proxy on the bridge's address, where pods reach the
	// machine, in front of the cluster's cloud; the Secret the manifests read points at it.
	token, err := os.ReadFile(c.CloudTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(c.CloudCAFile)
	if err != nil {
		t.Fatal(err)
	}
	w := witness.Of(t, c.CloudURL, strings.TrimSpace(string(token)), ca)
	front := w.Front(t, net.JoinHostPort(c.Gateway.String(), "0"), func(r *http.Request) string {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		return host
	})
	o := c.CCMManifests()
	cloudConfig, err := local.File{Endpoint: front, Token: strings.TrimSpace(string(token))}.Marshal("the in-cluster handover test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Env.Client.CoreV1().Secrets(o.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: o.CloudConfig.Name, Namespace: o.Namespace},
		Data:       map[string][]byte{o.CloudConfig.Key: cloudConfig},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the cloud config Secret: %v", err)
	}
	if err := c.StartCCM(ctx); err != nil {
		t.Fatal(err)
	}

	nodeIP, hostDir := map[string]string{}, map[string]string{}
	var nodes []string
	for _, n := range c.Nodes {
		nodeIP[n.Name] = n.Address.String()
		hostDir[n.Name] = filepath.Join(dir, "hosts", n.InstanceID)
		nodes = append(nodes, n.Name)
	}
	pods, err := c.Env.Client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(render.SelectorLabels).String()})
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]bool{}
	for _, p := range pods.Items {
		on[p.Spec.NodeName] = true
	}
	if len(pods.Items) != 3 || len(on) != 3 {
		t.Fatalf("%d replicas on %d nodes; the witness tells replicas apart by node, so it needs one a node", len(pods.Items), len(on))
	}

	ns := "kill-loop"
	if _, err := c.Env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &scenario{t: t, env: c.Env, ns: ns, cluster: c.Config().ClusterName, lease: render.LeaseName, class: class, w: w, nodes: nodes}

	var mu sync.Mutex
	var replicas []*replica
	byIdentity := map[string]*replica{}
	killLoop{
		s: s,
		replicaOf: func(id string) *replica {
			mu.Lock()
			defer mu.Unlock()
			if r, ok := byIdentity[id]; ok {
				return r
			}
			// The identity is the host name (the node's, on the host network) and a
			// random suffix.
			node := id[:max(0, strings.LastIndex(id, "_"))]
			ip, ok := nodeIP[node]
			if !ok {
				return nil
			}
			r := &replica{name: ip, identity: id}
			replicas = append(replicas, r)
			byIdentity[id] = r
			return r
		},
		kill: func(r *replica) {
			node := r.identity[:strings.LastIndex(r.identity, "_")]
			pids := ccmProcesses(t, hostDir[node])
			for _, pid := range pids {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatalf("SIGKILL to the replica on %s (pid %d): %v", node, pid, err)
				}
			}
			r.killed = time.Now()
			poll.Within(t, time.Minute, fmt.Sprintf("the replica on %s (pids %v) to die", node, pids), func() error {
				for _, pid := range pids {
					if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); len(b) > 0 {
						return fmt.Errorf("pid %d still runs", pid)
					}
				}
				return nil
			})
			// A killed container comes back only after kubelet's restart back-off, which
			// grows with every kill (up to minutes): the dead replica's pod is deleted
			// instead, as a crashed machine's would be, and its Deployment starts a new
			// one at once. The takeover is measured from the kill, before this.
			pods, err := c.Env.Client.CoreV1().Pods(o.Namespace).List(t.Context(), metav1.ListOptions{
				LabelSelector: labels.SelectorFromSet(render.SelectorLabels).String(),
				FieldSelector: "spec.nodeName=" + node,
			})
			if err != nil {
				t.Fatalf("list the replica's pod on %s: %v", node, err)
			}
			for _, p := range pods.Items {
				err := c.Env.Client.CoreV1().Pods(o.Namespace).Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatalf("delete the killed replica's pod %s: %v", p.Name, err)
				}
			}
		},
		ready: func(ctx context.Context) error {
			pods, err := c.Env.Client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(render.SelectorLabels).String()})
			if err != nil {
				return err
			}
			up := 0
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					if cs.Ready && cs.State.Running != nil {
						up++
					}
				}
			}
			if up != 3 {
				return fmt.Errorf("%d of 3 replicas running and ready", up)
			}
			return nil
		},
		all: func() []*replica {
			mu.Lock()
			defer mu.Unlock()
			return append([]*replica(nil), replicas...)
		},
	}.run(t)
}

// ccmProcesses finds the host pids of the cloud-controller-manager container on one node
// of this test's cluster: the processes whose command is the manager's in the network
// namespace of the node's host instance (the replicas run on the host network). Other
// clusters on the machine have nodes of the same names; their processes are in other
// namespaces.
func ccmProcesses(t *testing.T, hostDir string) []int {
	t.Helper()
	netns := ""
	var managers []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		switch {
		case netns == "" && bytes.Contains(cmdline, []byte("kubelet")) && bytes.Contains(cmdline, []byte(hostDir+string(filepath.Separator))):
			// The host instance's kubelet, in the node's network namespace.
			if ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil {
				netns = ns
			}
		case bytes.HasPrefix(cmdline, []byte("/cloud-controller-manager\x00")) && bytes.Contains(cmdline, []byte("--leader-elect")):
			managers = append(managers, pid)
		}
	}
	if netns == "" {
		t.Fatalf("no process of the host instance in %s", hostDir)
	}
	var found []int
	for _, pid := range managers {
		if ns, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns", "net")); err == nil && ns == netns {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d cloud-controller-manager processes in the network namespace %s of %s, want 1: %v", len(found), netns, hostDir, found)
	}
	return found
}
