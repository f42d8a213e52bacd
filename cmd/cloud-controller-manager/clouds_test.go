package main

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/manager/clouds"
	"github.com/nephele-dev/nephele/providers/local"
)

// testCloud is one of the local clouds of TestSeveralClouds.
type testCloud struct {
	name, class string
	srv         *server.Server
	admin       *client.Client
	vips        netip.Prefix
	config      string
	nodes       []string
}

// TestSeveralClouds runs one manager for two local clouds, east (the default) and west,
// with an on-premises node no cloud owns. While west is down (its instance and route
// calls answer 503) and throttles its load balancer calls (cutting west's budget),
// east's nodes are initialized
// and routed and east's Services (its class's and the unclassed one) get east's VIPs,
// without east's budget ever being cut. Once west is back, its nodes and its Service
// converge in west. Neither cloud touches the other's nodes, nor anyone the on-premises
// node, and no Event tells about a node of the manager's other cloud.
func TestSeveralClouds(t *testing.T) {
	ctx := t.Context()
	env := testenv.New(t, controlplane.Options{})
	newCloud := func(name string, vipOctet, nodeOctet byte) *testCloud {
		c := &testCloud{name: name, class: "nephele.dev/" + name, vips: testnet.LoopbackPrefix(vipOctet)}
		c.srv, c.admin = servertest.Start(t, server.Config{Token: name + "-admin", CCMToken: name + "-ccm",
			VIPPool: c.vips, InstanceCIDR: testnet.LoopbackPrefix(nodeOctet), Logger: testlog.New(t, 0).WithName(name)})
		cfg, err := local.File{Endpoint: c.srv.URL(), TokenFile: writeFile(t, name+"-token", name+"-ccm\n"), RequestTimeout: "10s", ProviderIDScheme: name}.Marshal(t.Name())
		if err != nil {
			t.Fatal(err)
		}
		c.config = writeFile(t, name+".yaml", string(cfg))
		return c
	}
	east, west := newCloud("east", 121, 122), newCloud("west", 125, 126)

	// Two nodes per cloud, each declaring its cloud's platform as a kubelet would with
	// --node-labels, and a node on premises that declares a platform nobody owns.
	nodes := env.Client.CoreV1().Nodes()
	cidr := 0
	newNode := func(name, platform string) *corev1.Node {
		cidr++
		n, err := nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cloud.LabelNodePlatform: platform}},
			Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", cidr), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", cidr)},
				Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []*testCloud{east, west} {
		for i := range 2 {
			name := fmt.Sprintf("%s-%d", c.name, i)
			if _, err := c.admin.CreateInstance(ctx, api.InstanceSpec{Name: name}); err != nil {
				t.Fatal(err)
			}
			newNode(name, c.name)
			c.nodes = append(c.nodes, name)
		}
	}
	onPrem := newNode("on-prem-0", "on-prem")

	// West is down for instances and routes, and throttles load balancer calls.
	for _, f := range []api.Fault{
		{Operation: "instances.*", Outage: true},
		{Operation: "routes.*", Outage: true},
		{Operation: "lb.*", RateLimit: &api.RateLimit{QPS: 0.5, Burst: 1}},
	} {
		if err := west.admin.PutFault(ctx, f); err != nil {
			t.Fatal(err)
		}
	}

	cloudsFile, err := clouds.File{APIVersion: clouds.APIVersion, Kind: clouds.Kind, Clouds: []clouds.Cloud{
		{Name: east.name, Provider: local.ProviderName, CloudConfig: east.config, LoadBalancerClass: east.class, Default: true},
		{Name: west.name, Provider: local.ProviderName, CloudConfig: west.config, LoadBalancerClass: west.class},
	}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	securePort := testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1"))
	start := time.Now()
	ccm := proctest.Start(t, "cloud-controller-manager",
		"--clouds-config="+writeFile(t, "clouds.yaml", string(cloudsFile)), "--undeclared-nodes=ignore",
		"--kubeconfig="+env.Kubeconfig, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(int(securePort)),
		"--cluster-cidr=10.244.0.0/16", "--cluster-name=several", "--leader-elect-resource-name=several-ccm", "--v=2")

	services := env.Client.CoreV1().Services(metav1.NamespaceDefault)
	newService := func(name string, class *string) {
		_, err := services.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class,
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Service %s: %v", name, err)
		}
	}
	newService("east", ptr.To(east.class))
	newService("unclassed", nil)
	newService("west", ptr.To(west.class))
	// More of west's, so that its throttling answers 429s and cuts its budget.
	for i := range 3 {
		newService("west-"+strconv.Itoa(i), ptr.To(west.class))
	}

	// servedBy waits for Service name's VIP from c's pool.
	servedBy := func(name string, c *testCloud) {
		t.Helper()
		poll.Within(t, pollTimeout, "Service "+name+" to get a VIP of cloud "+c.name, func() error {
			s, err := services.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(s.Status.LoadBalancer.Ingress) == 0 {
				return fmt.Errorf("no ingress")
			}
			if ip := netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP); !c.vips.Contains(ip) {
				t.Fatalf("Service %s got VIP %s, not of cloud %s (%s)", name, ip, c.name, c.vips)
			}
			return nil
		})
	}
	// initializedBy waits for c's nodes to carry c's provider IDs, without the taint.
	initializedBy := func(c *testCloud) {
		t.Helper()
		for _, name := range c.nodes {
			poll.Within(t, pollTimeout, "node "+name+" to be initialized by cloud "+c.name, func() error {
				n, err := nodes.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if !strings.HasPrefix(n.Spec.ProviderID, c.name+"://") {
					return fmt.Errorf("provider ID %q", n.Spec.ProviderID)
				}
				if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
					return fmt.Errorf("still tainted")
				}
				return nil
			})
		}
	}
	// routedBy waits for c's route table to hold exactly a route to each of its nodes.
	routedBy := func(c *testCloud) {
		t.Helper()
		poll.Within(t, pollTimeout, "cloud "+c.name+" to route to its nodes only", func() error {
			routes, err := c.admin.ListRoutes(ctx, "several")
			if err != nil {
				return err
			}
			var targets []string
			for _, r := range routes {
				targets = append(targets, r.TargetNode)
			}
			sort.Strings(targets)
			if !slices.Equal(targets, c.nodes) {
				return fmt.Errorf("routes to %q, want %q", targets, c.nodes)
			}
			return nil
		})
	}

	// East converges while west is down.
	initializedBy(east)
	servedBy("east", east)
	servedBy("unclassed", east)
	routedBy(east)
	eastDone := time.Since(start)
	for _, name := range west.nodes {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.ProviderID != "" {
			t.Fatalf("west's node %s has provider ID %q while west is down", name, n.Spec.ProviderID)
		}
	}
	// East may converge before a failed call to west is counted: west's syncs run
	// beside east's, and a failed one is counted when its call returns.
	var families metrictest.Families
	var westFailed float64
	poll.Within(t, pollTimeout, "cloud calls counted by provider", func() error {
		families = scrape(t, env, securePort)
		eastCalls := families.Value("nephele_cloud_requests_total", map[string]string{"provider": "east"})
		westFailed = families.Value("nephele_cloud_requests_total", map[string]string{"provider": "west", "result": "error"})
		if eastCalls == 0 || westFailed == 0 {
			return fmt.Errorf("cloud calls by provider: east %v, west failed %v; want both above 0 (are the families still so named?)", eastCalls, westFailed)
		}
		return nil
	})
	poll.Within(t, pollTimeout, "west's throttling to cut west's budget", func() error {
		families = scrape(t, env, securePort)
		if cuts := families.Value("nephele_cloud_budget_cuts_total", map[string]string{"provider": "west"}); cuts == 0 {
			return fmt.Errorf("not cut yet")
		}
		return nil
	})
	if cuts := families.Value("nephele_cloud_budget_cuts_total", map[string]string{"provider": "east"}); cuts != 0 {
		t.Errorf("east's budget was cut %v times while only west throttled", cuts)
	}
	t.Logf("east converged %s after the start, with west down (%v failed calls there); budget rate now: east %v/s, west %v/s",
		eastDone.Round(time.Millisecond), westFailed,
		families.Value("nephele_cloud_budget_rate", map[string]string{"provider": "east"}),
		families.Value("nephele_cloud_budget_rate", map[string]string{"provider": "west"}))

	// West comes back and converges in west.
	if err := west.admin.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	initializedBy(west)
	servedBy("west", west)
	for i := range 3 {
		servedBy("west-"+strconv.Itoa(i), west)
	}
	routedBy(west)
	routedBy(east)
	families = scrape(t, env, securePort)
	if cuts := families.Value("nephele_cloud_budget_cuts_total", map[string]string{"provider": "east"}); cuts != 0 {
		t.Errorf("east's budget was cut %v times", cuts)
	}

	// The on-premises node: untouched, and told why by the default cloud's node and
	// lifecycle controllers. The clouds' nodes: no NotOwned Event, though each cloud leaves the
	// other's alone.
	got, err := nodes.Get(ctx, onPrem.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != onPrem.ResourceVersion {
		t.Errorf("the on-premises node was written: resource version %s, was %s; spec %+v, conditions %+v",
			got.ResourceVersion, onPrem.ResourceVersion, got.Spec, got.Status.Conditions)
	}
	events, err := env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + ownership.EventNotOwned})
	if err != nil {
		t.Fatal(err)
	}
	onPremTold := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name != onPrem.Name {
			t.Errorf("NotOwned Event on %s, a node of the manager's: %s", e.InvolvedObject.Name, e.Message)
			continue
		}
		if !strings.Contains(e.Message, "(east, west)") {
			t.Errorf("NotOwned Event on the on-premises node names not both clouds' platforms: %s", e.Message)
		}
		onPremTold++
	}
	// One per controller that tells (node, lifecycle), from the default cloud only.
	if onPremTold != 2 {
		t.Errorf("%d NotOwned Events on the on-premises node, want 2 (the default cloud's node and lifecycle controllers)", onPremTold)
	}
	select {
	case <-ccm.Done():
		t.Fatalf("the manager exited: %v", ccm.Err())
	default:
	}
}
