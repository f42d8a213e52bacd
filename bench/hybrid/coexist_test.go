package hybrid

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/ccm/nephele"
	"github.com/nephele-dev/nephele/bench/ccm/upstream"
	"github.com/nephele-dev/nephele/bench/upstreamcloud"
	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

func TestMain(m *testing.M) {
	// The child process: `upstream <flags>` runs upstream's cloud-controller-manager,
	// `nephele <flags>` nephele's, each with the local cloud's provider.
	proctest.Main(func() int {
		return ccm.Child(os.Args[1:], os.Stderr, map[ccm.Impl]ccm.Func{ccm.Upstream: upstream.Run, ccm.Nephele: nephele.Run})
	})
	os.Exit(m.Run())
}

const (
	clusterName = "hybrid"
	clusterCIDR = "10.244.0.0/16"
	// nepheleClass is the loadBalancerClass nephele serves; upstream's CCM serves the
	// Services without a class, as every upstream CCM does.
	nepheleClass = "nephele.dev/local"
)

// localCloud is one local cloud of the cluster.
type localCloud struct {
	name   string
	admin  *client.Client
	config string // the provider's --cloud-config file
}

func startCloud(t *testing.T, name string, vips string) *localCloud {
	t.Helper()
	srv, admin := servertest.Start(t, server.Config{
		VIPPool:   netip.MustParsePrefix(vips),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	data, err := local.File{Endpoint: srv.URL(), Token: servertest.Token, RequestTimeout: "10s"}.Marshal("bench/hybrid")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return &localCloud{name: name, admin: admin, config: path}
}

// nodeSpec is one Node of the cluster, as its kubelet registers it.
type nodeSpec struct {
	name     string
	cloud    *localCloud // nil: a machine no cloud manages
	platform string      // the node.kubernetes.io/platform label; "" for none
	ready    bool
	podCIDR  string
}

// register creates the node as a kubelet with --cloud-provider=external does: the
// uninitialized taint, no provider ID, its own addresses and readiness, and (as the
// route tests need) a pod CIDR.
func register(t *testing.T, nodes kubernetes.Interface, n nodeSpec) *corev1.Node {
	t.Helper()
	ready := corev1.ConditionFalse
	if n.ready {
		ready = corev1.ConditionTrue
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{}},
		Spec: corev1.NodeSpec{PodCIDR: n.podCIDR, PodCIDRs: []string{n.podCIDR}, Taints: []corev1.Taint{{
			Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now()}},
		},
	}
	if n.platform != "" {
		obj.Labels[cloud.LabelNodePlatform] = n.platform
	}
	created, err := nodes.CoreV1().Nodes().Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("registering node %s: %v", n.name, err)
	}
	return created
}

// notOwnedBy waits for the NotOwned Event, with a message containing why, that each
// named nephele controller records on node (the node and lifecycle controllers record
// them; the route and load balancer controllers only count).
func notOwnedBy(t *testing.T, c kubernetes.Interface, node, why string, controllerNames ...string) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("NotOwned events on %s naming %q from %s", node, why, strings.Join(controllerNames, ", ")), func() error {
		list, err := c.CoreV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + ownership.EventNotOwned,
		})
		if err != nil {
			return err
		}
		var missing []string
		for _, name := range controllerNames {
			if !slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
				return e.Source.Component == name && strings.Contains(e.Message, why)
			}) {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("none from %v", missing)
		}
		return nil
	})
}

func initializedAs(t *testing.T, c kubernetes.Interface, node, scheme string) *corev1.Node {
	t.Helper()
	var got *corev1.Node
	poll.Eventually(t, node+" initialized with a "+scheme+":// provider ID", func() error {
		n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
			return fmt.Errorf("still tainted (provider ID %q)", n.Spec.ProviderID)
		}
		if !strings.HasPrefix(n.Spec.ProviderID, scheme+"://") {
			return fmt.Errorf("provider ID %q", n.Spec.ProviderID)
		}
		got = n
		return nil
	})
	return got
}

// routes returns "target cidr" of every route of the cluster in c.
func routes(t *testing.T, c *localCloud) []string {
	t.Helper()
	list, err := c.admin.ListRoutes(t.Context(), clusterName)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list {
		out = append(out, r.TargetNode+" "+r.DestinationCIDR)
	}
	slices.Sort(out)
	return out
}

// backends returns the backend node names of every load balancer of the cluster in c.
func backends(t *testing.T, c *localCloud) map[string][]string {
	t.Helper()
	list, err := c.admin.ListLoadBalancers(t.Context(), clusterName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, lb := range list {
		var names []string
		for _, b := range lb.Spec.Backends {
			names = append(names, b.NodeName)
		}
		slices.Sort(names)
		out[lb.Spec.Service] = names
	}
	return out
}

// metrics scrapes the nephele manager's /metrics on port as the cluster admin.
func metrics(t *testing.T, env *controlplane.Env, port uint16) metrictest.Families {
	t.Helper()
	return metrictest.Scrape(t, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), env.Token)
}

func loadBalancerService(name string, class string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if class != "" {
		svc.Spec.LoadBalancerClass = &class
	}
	return svc
}

// TestNepheleBesideUpstream: one cluster, three kinds of node: cloud A's (nephele's,
// provider-ID scheme local), cloud B's (upstream's CCM, scheme localb) and an
// on-premises machine no cloud manages. Each node declares its platform as a kubelet
// can (node.kubernetes.io/platform). nephele runs with --undeclared-nodes=ignore.
//
// nephele initializes, routes and balances to cloud A's nodes only, and never writes
// another node: their resource versions do not move while each of its four controllers
// records why it leaves them alone, and cloud B's not-Ready node, whose instance cloud A
// does not have, is not deleted though deletion is down to a second (its lifecycle
// rounds are counted before looking). Then upstream's CCM starts beside it and initializes
// cloud B's nodes; nephele still touches none of them. What upstream's controllers do to
// the nodes that are not theirs is logged as evidence.
func TestNepheleBesideUpstream(t *testing.T) {
	env := testenv.New(t, controlplane.Options{})
	ctx := t.Context()
	a := startCloud(t, "a", "127.123.0.0/24")
	b := startCloud(t, "b", "127.124.0.0/24")

	nodes := []nodeSpec{
		{name: "a-1", cloud: a, platform: local.ProviderName, ready: true, podCIDR: "10.244.1.0/24"},
		{name: "a-2", cloud: a, platform: local.ProviderName, ready: true, podCIDR: "10.244.2.0/24"},
		{name: "b-1", cloud: b, platform: upstreamcloud.SecondProviderName, ready: true, podCIDR: "10.244.3.0/24"},
		{name: "b-2", cloud: b, platform: upstreamcloud.SecondProviderName, ready: false, podCIDR: "10.244.4.0/24"},
		{name: "onprem-1", platform: "on-prem", ready: false, podCIDR: "10.244.5.0/24"},
	}
	registered := map[string]*corev1.Node{}
	for _, n := range nodes {
		if n.cloud != nil {
			if _, err := n.cloud.admin.CreateInstance(ctx, api.InstanceSpec{Name: n.name}); err != nil {
				t.Fatal(err)
			}
		}
		registered[n.name] = register(t, env.Client, n)
	}
	services := env.Client.CoreV1().Services(metav1.NamespaceDefault)
	for _, svc := range []*corev1.Service{loadBalancerService("web-a", nepheleClass), loadBalancerService("web-b", "")} {
		if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	common := func(port uint16) []string {
		return []string{
			"--kubeconfig=" + env.Kubeconfig, "--authentication-kubeconfig=" + env.Kubeconfig, "--authorization-kubeconfig=" + env.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(int(port)), "--cert-dir=" + t.TempDir(),
			"--cluster-name=" + clusterName, "--cluster-cidr=" + clusterCIDR, "--configure-cloud-routes=true", "--v=2",
		}
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	nephelePort := testnet.FreePort(t, "tcp", loopback)
	// Each CCM has a lease of its own: two CCMs on one lease name would take turns. The
	// lifecycle would delete a node whose instance it cannot find within about a second.
	proctest.Start(t, "nephele cloud-controller-manager", append([]string{"nephele",
		"--cloud-provider=" + local.ProviderName, "--cloud-config=" + a.config,
		"--leader-elect-resource-name=nephele-local", "--undeclared-nodes=ignore",
		"--node-monitor-period=200ms", "--node-deletion-grace-period=1s",
		"--load-balancer-class=" + nepheleClass}, common(nephelePort)...)...)

	// nephele's own nodes: initialized, routed in cloud A, behind cloud A's load balancer.
	for _, name := range []string{"a-1", "a-2"} {
		initializedAs(t, env.Client, name, local.ProviderName)
	}
	wantRoutesA := []string{"a-1 10.244.1.0/24", "a-2 10.244.2.0/24"}
	poll.Eventually(t, "cloud A's routes", func() error {
		if got := routes(t, a); !slices.Equal(got, wantRoutesA) {
			return fmt.Errorf("routes %q, want %q", got, wantRoutesA)
		}
		return nil
	})
	poll.Eventually(t, "cloud A's load balancer behind a-1 and a-2", func() error {
		if got := backends(t, a); !slices.Equal(got["default/web-a"], []string{"a-1", "a-2"}) || len(got) != 1 {
			return fmt.Errorf("load balancers %v", got)
		}
		return nil
	})
	// The others: each controller has looked and left them alone.
	for name, why := range map[string]string{"b-1": `platform "localb"`, "b-2": `platform "localb"`, "onprem-1": `platform "on-prem"`} {
		notOwnedBy(t, env.Client, name, why, manager.CloudNodeController, manager.CloudNodeLifecycleController)
	}
	// Ten lifecycle rounds (two seconds, twice the deletion grace) after the first
	// Events: a lifecycle that looked up cloud B's not-Ready node in cloud A would have
	// found it gone and deleted it by now.
	rounds := metrics(t, env, nephelePort).Value("nephele_controller_syncs_total", map[string]string{"controller": manager.CloudNodeLifecycleController})
	poll.Eventually(t, "ten more lifecycle rounds", func() error {
		if got := metrics(t, env, nephelePort).Value("nephele_controller_syncs_total", map[string]string{"controller": manager.CloudNodeLifecycleController}); got < rounds+10 {
			return fmt.Errorf("%v rounds, want %v", got, rounds+10)
		}
		return nil
	})
	m := metrics(t, env, nephelePort)
	for _, c := range []string{manager.NodeRouteController, manager.ServiceLBController} {
		if got := m.Value("nephele_node_ownership_skipped_total", map[string]string{"controller": c}); got != 3 {
			t.Errorf("%s skipped %v nodes, want the 3 that are not nephele's", c, got)
		}
	}
	if got := m.Value("nephele_node_lifecycle_deletions_total", nil); got != 0 {
		t.Errorf("nephele's lifecycle deleted %v nodes", got)
	}
	for _, name := range []string{"b-1", "b-2", "onprem-1"} {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s, not nephele's: %v", name, err)
		}
		if n.ResourceVersion != registered[name].ResourceVersion {
			t.Errorf("node %s, not nephele's, was written: resource version %s, registered as %s (provider ID %q, taints %v)",
				name, n.ResourceVersion, registered[name].ResourceVersion, n.Spec.ProviderID, n.Spec.Taints)
		}
	}

	// Upstream's CCM for cloud B joins: it initializes cloud B's nodes.
	proctest.Start(t, "upstream cloud-controller-manager", append([]string{"upstream",
		"--cloud-provider=" + upstreamcloud.SecondProviderName, "--cloud-config=" + b.config,
		"--leader-elect=false", "--allocate-node-cidrs=true"}, common(testnet.FreePort(t, "tcp", loopback))...)...)
	for _, name := range []string{"b-1", "b-2"} {
		initializedAs(t, env.Client, name, upstreamcloud.SecondProviderName)
	}
	poll.Eventually(t, "cloud B's load balancer for the Service without a class", func() error {
		if _, ok := backends(t, b)["default/web-b"]; !ok {
			return fmt.Errorf("load balancers %v", backends(t, b))
		}
		return nil
	})

	// Evidence: what upstream's controllers do to nodes that are not theirs. Upstream
	// has no notion of ownership, so this is its behaviour, not nephele's failure, and
	// it is logged, never asserted. Its lifecycle runs every 5s: a bounded look.
	deleted := false
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !deleted; {
		_, err := env.Client.CoreV1().Nodes().Get(ctx, "onprem-1", metav1.GetOptions{})
		if deleted = apierrors.IsNotFound(err); !deleted {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if deleted {
		t.Log("evidence: upstream's cloud-node-lifecycle-controller deleted onprem-1, a not-Ready machine no cloud manages, because cloud B has no instance of that name")
	} else {
		t.Log("evidence: upstream's lifecycle controller did not delete onprem-1 within 30s (it did in every run when this test was written)")
	}
	t.Logf("evidence: cloud B's load balancer for default/web-b has backends %v (cloud A's nodes among them: upstream balances to every node)", backends(t, b)["default/web-b"])
	t.Logf("evidence: cloud B's routes %q: upstream's route controller tries every node with a pod CIDR in its own cloud, and marks a node whose route its cloud refused NetworkUnavailable:", routes(t, b))
	for _, name := range []string{"a-1", "a-2"} {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeNetworkUnavailable {
				t.Logf("evidence: %s NetworkUnavailable=%s (%s: %s)", name, c.Status, c.Reason, c.Message)
			}
		}
	}

	// nephele's side afterwards: cloud A's routes and load balancer unchanged, and
	// cloud B's nodes, initialized by upstream, still untouched by nephele.
	if got := routes(t, a); !slices.Equal(got, wantRoutesA) {
		t.Errorf("cloud A's routes after upstream joined: %q, want %q", got, wantRoutesA)
	}
	if got := backends(t, a); !slices.Equal(got["default/web-a"], []string{"a-1", "a-2"}) || len(got) != 1 {
		t.Errorf("cloud A's load balancers after upstream joined: %v", got)
	}
	// Cloud B's nodes now carry upstream's provider IDs: nephele's lifecycle decides
	// again, by the scheme, and still leaves them alone.
	for _, name := range []string{"b-1", "b-2"} {
		notOwnedBy(t, env.Client, name, `scheme "localb"`, manager.CloudNodeLifecycleController)
	}
	if got := metrics(t, env, nephelePort).Value("nephele_node_lifecycle_deletions_total", nil); got != 0 {
		t.Errorf("nephele's lifecycle deleted %v nodes", got)
	}
}
