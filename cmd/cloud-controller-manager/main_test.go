package main

import (
	"context"
	"strconv"

	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/manager"
)

// TestMain lets the test binary run main instead of the tests: the tests start the
// binary's real main path as a subprocess of themselves.
func TestMain(m *testing.M) {
	proctest.Main(func() int { main(); return 0 })
	os.Exit(m.Run())
}

const (
	pollTimeout      = 90 * time.Second
	annotationNodeIP = "alpha.kubernetes.io/provided-node-ip"
	lbFinalizer      = "service.kubernetes.io/load-balancer-cleanup"
	cloudToken       = "ccm-test-token"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommandLine checks the binary's start-up failures and help without a cluster.
func TestCommandLine(t *testing.T) {
	kubeconfig := writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	badConfig := writeFile(t, "cloud.yaml", "endpoint: http://127.0.0.1:1\ntoken: x\ntokenfile: y\n")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"help", []string{"--help"}, 0, []string{"Cloud providers in this binary: [local]", "--cloud-config", "--leader-elect", "--controllers"}},
		{"no cloud config", []string{"--cloud-provider=local", "--kubeconfig=" + kubeconfig, "--secure-port=0"}, 1, []string{"invalid value for --cloud-config", "no --cloud-config given"}},
		{"strict cloud config", []string{"--cloud-provider=local", "--cloud-config=" + badConfig, "--kubeconfig=" + kubeconfig, "--secure-port=0"}, 1, []string{`unknown field "tokenfile"`}},
		{"unknown provider", []string{"--cloud-provider=aws", "--kubeconfig=" + kubeconfig, "--secure-port=0"}, 1, []string{`invalid value for --cloud-provider`, `unknown cloud provider "aws"`, "known providers are local"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := proctest.Start(t, "cloud-controller-manager", tt.args...)
			if code := p.Wait(t, pollTimeout); code != tt.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tt.code, p.Output())
			}
			for _, w := range tt.want {
				if !strings.Contains(p.Output(), w) {
					t.Errorf("output does not contain %q:\n%s", w, p.Output())
				}
			}
		})
	}
}

// TestEndToEnd runs the real binary path against a real control plane (etcd,
// kube-apiserver, kwok turning Nodes Ready) and a real local cloud: Nodes are
// initialized from their instances, get routes for their pod CIDRs, and a Service of
// type LoadBalancer gets a VIP that forwards TCP to the nodes.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, controlplane.Options{Kwok: true})

	vipPool, nodeNet := testnet.LoopbackPrefix(111), testnet.LoopbackPrefix(112)
	cloudCfg := server.Config{
		StatePath:    filepath.Join(t.TempDir(), "cloud.db"),
		Token:        cloudToken,
		VIPPool:      vipPool,
		InstanceCIDR: nodeNet,
		Logger:       testlog.New(t, 0),
	}
	cloudCfg.DataPlane.HealthInterval = 200 * time.Millisecond
	srv, admin := servertest.Start(t, cloudCfg)

	// Three instances, then their Nodes as a kubelet with --cloud-provider=external
	// and --node-ip registers them.
	type member struct {
		inst   *api.Instance
		ip     netip.Addr
		podNet netip.Prefix
	}
	var members []member
	for i := range 3 {
		ip := nodeNet.Addr().Next()
		for range i {
			ip = ip.Next()
		}
		spec := api.InstanceSpec{
			Name:      fmt.Sprintf("node-%d", i+1),
			Addresses: []api.Address{{Type: api.AddressInternalIP, Address: ip.String()}},
			Labels:    map[string]string{"nephele.dev/pool": "e2e"},
		}
		if i == 2 {
			spec.InstanceType = "local.large"
		}
		inst, err := admin.CreateInstance(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, member{inst: inst, ip: ip, podNet: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i+1))})
	}
	for _, m := range members {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        m.inst.Name,
				Annotations: map[string]string{annotationNodeIP: m.ip.String()},
				Labels:      map[string]string{"type": "kwok"},
			},
			Spec: corev1.NodeSpec{
				PodCIDR:  m.podNet.String(),
				PodCIDRs: []string{m.podNet.String()},
				Taints:   []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			},
		}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	tokenFile := writeFile(t, "token", cloudToken+"\n")
	cloudConfig := writeFile(t, "cloud.yaml", fmt.Sprintf("endpoint: %s\ntokenFile: %s\nrequestTimeout: 10s\n", srv.URL(), tokenFile))
	securePort := testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1"))
	ccm := proctest.Start(t, "cloud-controller-manager",
		"--cloud-provider=local", "--cloud-config="+cloudConfig, "--kubeconfig="+env.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(int(securePort)),
		"--cluster-cidr=10.244.0.0/16", "--v=2")

	// Node initialization.
	for _, m := range members {
		name := m.inst.Name
		poll.Within(t, pollTimeout, name+" to be initialized", func() error {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			state := fmt.Errorf("providerID %q labels %v taints %v addresses %v", n.Spec.ProviderID, n.Labels, n.Spec.Taints, n.Status.Addresses)
			for _, tn := range n.Spec.Taints {
				if tn.Key == cloudproviderapi.TaintExternalCloudProvider {
					return state
				}
			}
			hasIP := false
			for _, a := range n.Status.Addresses {
				hasIP = hasIP || a.Type == corev1.NodeInternalIP && a.Address == m.ip.String()
			}
			ok := n.Spec.ProviderID == "local://"+m.inst.ID &&
				n.Labels[corev1.LabelTopologyZone] == m.inst.Zone &&
				n.Labels[corev1.LabelTopologyRegion] == m.inst.Region &&
				n.Labels[corev1.LabelInstanceTypeStable] == m.inst.InstanceType &&
				n.Labels["nephele.dev/pool"] == "e2e" && hasIP
			if !ok {
				return state
			}
			return nil
		})
	}
	if members[2].inst.InstanceType != "local.large" || members[0].inst.Zone == members[1].inst.Zone {
		t.Errorf("instances %+v, %+v, %+v: want distinct zones and one local.large", members[0].inst, members[1].inst, members[2].inst)
	}

	// Routes for every pod CIDR.
	poll.Within(t, pollTimeout, "a route per node", func() error {
		rs, err := admin.ListRoutes(ctx, "kubernetes")
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, r := range rs {
			got[r.DestinationCIDR] = r.TargetNode
		}
		for _, m := range members {
			if got[m.podNet.String()] != m.inst.Name {
				return fmt.Errorf("routes %v", got)
			}
		}
		if len(got) != len(members) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})

	// A Service of type LoadBalancer: its VIP forwards to the node port on the nodes'
	// addresses, where echo servers stand in for kube-proxy.
	ips := make([]netip.Addr, 0, len(members))
	for _, m := range members {
		ips = append(ips, m.ip)
	}
	nodePort := testnet.FreeNodePort(t, ips...)
	for _, m := range members {
		testnet.TCPEcho(t, netip.AddrPortFrom(m.ip, nodePort), m.inst.Name)
	}
	vip := vipPool.Addr().Next()
	port := testnet.FreePort(t, "tcp", vip)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "echo", Protocol: corev1.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)}},
		},
	}
	if _, err := env.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(t, pollTimeout, "the Service to have the VIP as ingress", func() error {
		s, err := env.Client.CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ing := s.Status.LoadBalancer.Ingress
		// VIPs on loopback: the user-space proxy, ipMode Proxy.
		if len(ing) == 1 && ing[0].IP == vip.String() && ing[0].IPMode != nil && *ing[0].IPMode == corev1.LoadBalancerIPModeProxy {
			return nil
		}
		return fmt.Errorf("ingress %+v finalizers %v", ing, s.Finalizers)
	})
	front := netip.AddrPortFrom(vip, port)
	seen := map[string]bool{}
	poll.Within(t, pollTimeout, "the VIP to forward to every node", func() error {
		a, err := testnet.AskTCP(front, netip.Addr{}, "ping")
		if err == nil && strings.HasSuffix(a, " ping") {
			seen[testnet.Tag(a)] = true
		}
		if len(seen) != len(members) {
			return fmt.Errorf("answered by %v, last error %v", seen, err)
		}
		return nil
	})

	// Deleting the Service deletes the load balancer, then the finalizer goes.
	if err := env.Client.CoreV1().Services("default").Delete(ctx, "echo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(t, pollTimeout, "the load balancer and the Service to be gone", func() error {
		lbs, err := admin.ListLoadBalancers(ctx, "")
		if err != nil {
			return err
		}
		_, gerr := env.Client.CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
		if len(lbs) == 0 && gerr != nil {
			return nil
		}
		return fmt.Errorf("%d load balancers, service lookup %v", len(lbs), gerr)
	})

	// Upstream's metric names, every one of docs/manager.md's table, after the
	// controllers have done their work.
	checkUpstreamMetrics(t, env, securePort)

	// SIGTERM stops the manager cleanly.
	ccm.Stop(t, pollTimeout)
}

// checkUpstreamMetrics scrapes /metrics of the manager on port as the cluster admin and
// fails for each metric of docs/manager.md's table of upstream names it lacks, and for
// each controller without a workqueue_depth series of its own.
func checkUpstreamMetrics(t *testing.T, env *controlplane.Env, port uint16) {
	t.Helper()
	names := upstreamMetricNames(t)
	if len(names) < 15 {
		t.Fatalf("docs/manager.md's table of upstream metric names has %d rows: the table moved or changed its form", len(names))
	}
	families := scrape(t, env, port)
	for _, name := range names {
		name = strings.ReplaceAll(name, "<provider>", "local")
		if f, ok := families[name]; !ok || len(f.GetMetric()) == 0 {
			t.Errorf("/metrics has no %s (docs/manager.md maps it)", name)
		}
	}
	queues := map[string]bool{}
	for _, m := range families["workqueue_depth"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" {
				queues[l.GetValue()] = true
			}
		}
	}
	for _, c := range []string{manager.CloudNodeController, manager.CloudNodeLifecycleController, manager.ServiceLBController, manager.NodeRouteController} {
		if !queues[c] {
			t.Errorf("workqueue_depth has no series for controller %s (it has %v)", c, queues)
		}
	}
	leader := false
	for _, m := range families["leader_election_master_status"].GetMetric() {
		leader = leader || m.GetGauge().GetValue() == 1
	}
	if !leader {
		t.Error("leader_election_master_status is not 1 for the manager's lease, which it holds")
	}
}

// scrape reads /metrics of the manager on port as the cluster admin.
func scrape(t *testing.T, env *controlplane.Env, port uint16) metrictest.Families {
	t.Helper()
	return metrictest.Scrape(t, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), env.Token)
}

// upstreamMetricNames reads the first column of docs/manager.md's table of upstream
// metric names.
func upstreamMetricNames(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "manager.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Upstream's metric names")
	if !ok {
		t.Fatal("docs/manager.md has no section \"Upstream's metric names\"")
	}
	var names []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok := strings.Cut(rest, "`"); ok {
				names = append(names, name)
			}
		}
	}
	return names
}
