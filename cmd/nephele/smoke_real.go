package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcluster"
)

// Objects of the smoke checks on real nodes, all in smokeNamespace.
const (
	// probePrefix names the probe pods, one bound to each node: node-1's is
	// nephele-probe-node-1.
	probePrefix = "nephele-probe-"
	// demoPort is where the demo HTTP server listens, and the Service's port.
	demoPort = 8080
	// vipRequests bounds the requests through the VIP that may pass before pods on
	// every node have answered.
	vipRequests = 200
)

// realSmoke is one run of the smoke checks on real nodes; later checks use what earlier
// ones found.
type realSmoke struct {
	c    *localcluster.Cluster
	o    upOptions
	http *http.Client

	probes  []probe
	vip     string
	hcPort  int32 // the Service's health check node port
	lbName  string
	serving string // the node of the one replica left after scaling down
	lost    string // the node whose instance was terminated
}

// probe is a pod bound to one node, for pod-to-pod traffic.
type probe struct{ pod, node, ip string }

// demoAnswer is what the demo HTTP server answers (cmd/demo-http's Answer).
type demoAnswer struct {
	Pod   string `json:"pod"`
	PodIP string `json:"podIP"`
	Node  string `json:"node"`
}

// runRealSmoke runs the smoke checks on a cluster started with DeferCCM: first what
// must hold before nephele's cloud-controller-manager runs, then it starts the CCM, then
// the rest. Each check is bounded by --timeout; the first failure stops the run.
func runRealSmoke(ctx context.Context, c *localcluster.Cluster, o upOptions, out io.Writer) error {
	s := &realSmoke{c: c, o: o, http: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		Proxy:             nil, // the VIP is local: never ask an environment's proxy
		DisableKeepAlives: true,
	}}}
	ck := &checks{w: out}
	fmt.Fprintf(out, "smoke settings: kube-controller-manager %s; cloud-controller-manager %s\n",
		strings.Join(smokeControllerManagerArgs, " "), strings.Join(smokeCCMArgs, " "))
	type check struct {
		name string
		fn   func(context.Context) (string, error)
	}
	run := func(list []check) error {
		for _, chk := range list {
			cctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("not done within --timeout %s", o.timeout))
			err := ck.run(cctx, chk.name, chk.fn)
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	}
	before := []check{
		{"a probe pod runs on every node (tolerating the uninitialized taint)", s.probesRun},
		{"pod-to-pod across nodes fails: no route in the cloud yet", s.podToPodFails},
	}
	var after []check
	for _, n := range c.Nodes {
		after = append(after, check{"node " + n.Name + " initialized by the CCM", func(ctx context.Context) (string, error) {
			return s.nodeInitialized(ctx, n.Name)
		}})
	}
	after = append(after,
		check{"every node's pod CIDR routed in the local cloud", s.routes},
		check{"pod-to-pod across nodes works through the routes", s.podToPodWorks},
		check{"a route deleted behind the controller's back breaks pod-to-pod", s.routeDeleted},
		check{"the route controller's drift check restores it", s.routeRestored},
		check{"a Deployment of the demo server runs pods on every node", s.deployment},
		check{"Service " + smokeNamespace + "/" + smokeName + " (LoadBalancer, externalTrafficPolicy Local) gets an ingress IP", s.ingressIP},
		check{"the cloud's load balancer health-checks kube-proxy: every node healthy", s.everyBackendHealthy},
		check{"HTTP through the VIP reaches pods on every node", s.vipReachesEveryNode},
		check{"nephele migrate check passes", s.migrateCheck},
		check{"kubectl logs shows a pod's log", s.kubectlLogs},
		check{"kubectl exec runs a command in a pod", s.kubectlExec},
		check{"scaled to one replica, only its node is healthy and answers", s.scaledToOne},
		check{"terminating that node's instance: its Node goes NotReady", s.terminate},
		check{"the lifecycle controller deletes the terminated instance's Node", s.nodeDeleted},
		check{"the pod comes back on another node and answers through the VIP", s.podBack},
		check{"deleting the Service deletes the cloud load balancer", s.deleteService},
		check{"the VIP's listener is closed", s.listenerClosed},
	)
	total := len(before) + len(after)
	fail := func(err error) error {
		fmt.Fprintf(out, "smoke: FAILED (%d passed, %d failed, %d not run); logs in %s\n",
			ck.passed, ck.failed, total-ck.passed-ck.failed, strings.Join(c.LogDirs(), ", "))
		return err
	}

	fmt.Fprintln(out, "smoke checks before the cloud-controller-manager runs:")
	if err := run(before); err != nil {
		return fail(err)
	}
	ccmCtx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("not done within --timeout %s", o.timeout))
	err := c.StartCCM(ccmCtx)
	cancel()
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(out, "smoke checks:")
	if err := run(after); err != nil {
		return fail(err)
	}
	s.reportResources(out)
	fmt.Fprintf(out, "smoke: PASSED (%d checks)\n", ck.passed)
	return nil
}

// migrateCheck runs `nephele migrate check` (this very binary) against the cluster: every
// Node initialized with a local:// provider ID, the LoadBalancer Service owned by nephele,
// nephele holding its lease, nothing held by kube-controller-manager.
func (s *realSmoke) migrateCheck(ctx context.Context) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, self, "migrate", "check", "--kubeconfig", s.c.Env.Kubeconfig, "--provider", "local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nephele migrate check: %w:\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return fmt.Sprintf("%d checks passed", len(lines)), nil
}

// kubectl runs bin/kubectl as the admin and returns its standard output; a failure
// carries its standard error.
func (s *realSmoke) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.c.Kubectl, append([]string{"--kubeconfig", s.c.Env.Kubeconfig, "--namespace", smokeNamespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// get makes pod GET url with the demo server's client, through kubectl exec, and
// decodes the answer. A failure of the GET itself (not of kubectl) is a *getError.
func (s *realSmoke) get(ctx context.Context, pod, url string) (demoAnswer, error) {
	out, err := s.kubectl(ctx, "exec", pod, "--", "/demo-http", "get", url)
	var a demoAnswer
	if err != nil {
		msg := err.Error()
		// kubectl's standard error holds the client's one line, then kubectl's own.
		if i := strings.LastIndex(msg, "demo-http: "); i >= 0 {
			line, _, _ := strings.Cut(msg[i+len("demo-http: "):], "\n")
			return a, &getError{msg: line}
		}
		return a, err
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		return a, fmt.Errorf("%s answered %q: %w", url, out, err)
	}
	return a, nil
}

// getError is a GET from a pod that ran and failed: the network said no.
type getError struct{ msg string }

func (e *getError) Error() string { return e.msg }

func podURL(ip string) string { return "http://" + net.JoinHostPort(ip, strconv.Itoa(demoPort)) + "/" }

// demoContainer is the demo server's container, told its pod and node by the downward API.
func demoContainer() corev1.Container {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.Container{
		Name:            "demo",
		Image:           localcluster.DemoImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"),
			field("POD_IP", "status.podIP"), field("NODE_NAME", "spec.nodeName")},
		Ports: []corev1.ContainerPort{{ContainerPort: demoPort}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(demoPort)}},
			PeriodSeconds: 1,
		},
	}
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probesRun creates a probe pod bound to each node and waits until every one is Ready.
// The nodes are not initialized yet, so the pods tolerate every taint.
func (s *realSmoke) probesRun(ctx context.Context) (string, error) {
	pods := s.c.Env.Client.CoreV1().Pods(smokeNamespace)
	for _, n := range s.c.Nodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: probePrefix + n.Name, Labels: map[string]string{"app": "nephele-probe"}},
			Spec: corev1.PodSpec{
				NodeName:                      n.Name,
				Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:                    []corev1.Container{demoContainer()},
				TerminationGracePeriodSeconds: ptr.To[int64](5),
			},
		}
		// Admission refuses pods until kube-controller-manager made the default service account.
		err := eventually(ctx, func(ctx context.Context) error {
			_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		s.probes = append(s.probes, probe{pod: pod.Name, node: n.Name})
	}
	err := eventually(ctx, func(ctx context.Context) error {
		for i, p := range s.probes {
			pod, err := pods.Get(ctx, p.pod, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !podReady(pod) {
				return fmt.Errorf("pod %s on %s: phase %s, not Ready", p.pod, p.node, pod.Status.Phase)
			}
			s.probes[i].ip = pod.Status.PodIP
		}
		return nil
	})
	var where []string
	for _, p := range s.probes {
		where = append(where, p.node+" "+p.ip)
	}
	return strings.Join(where, ", "), err
}

// pairs are the probes and the probe of the next node, each node to another.
func (s *realSmoke) pairs() [][2]probe {
	var out [][2]probe
	for i, p := range s.probes {
		if len(s.probes) > 1 {
			out = append(out, [2]probe{p, s.probes[(i+1)%len(s.probes)]})
		}
	}
	return out
}

// podToPodFails checks that no probe reaches the probe of another node: without a route
// to its pod CIDR the traffic goes to the machine, which sends it nowhere.
func (s *realSmoke) podToPodFails(ctx context.Context) (string, error) {
	if len(s.probes) < 2 {
		return "one node: nothing across nodes", nil
	}
	var last string
	for _, pr := range s.pairs() {
		_, err := s.get(ctx, pr[0].pod, podURL(pr[1].ip))
		var ge *getError
		if !errors.As(err, &ge) {
			return "", fmt.Errorf("%s -> %s %s: want the GET to fail on the network, got %v", pr[0].node, pr[1].node, pr[1].ip, err)
		}
		last = fmt.Sprintf("%s -> %s: %s", pr[0].node, pr[1].ip, ge.msg)
	}
	return last, nil
}

func (s *realSmoke) nodeInitialized(ctx context.Context, name string) (string, error) {
	var node *corev1.Node
	err := eventually(ctx, func(ctx context.Context) error {
		var err error
		if node, err = s.c.Env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if ok, why := localcluster.Initialized(node); !ok {
			return errors.New(why)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, zone %s, type %s, %s", node.Spec.ProviderID,
		node.Labels[corev1.LabelTopologyZone], node.Labels[corev1.LabelInstanceTypeStable], nodeAddresses(node)), nil
}

func nodeAddresses(n *corev1.Node) string {
	var a []string
	for _, addr := range n.Status.Addresses {
		a = append(a, string(addr.Type)+" "+addr.Address)
	}
	return strings.Join(a, ", ")
}

// routeOf returns the cloud's route to node's pod CIDR, nil when there is none.
func (s *realSmoke) routeOf(ctx context.Context, node string) (*api.Route, string, error) {
	obj, err := s.c.Env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	routes, err := s.c.Cloud.ListRoutes(ctx, clusterName)
	if err != nil {
		return nil, "", err
	}
	for i, r := range routes {
		if r.DestinationCIDR == obj.Spec.PodCIDR && r.TargetNode == node {
			return &routes[i], obj.Spec.PodCIDR, nil
		}
	}
	return nil, obj.Spec.PodCIDR, nil
}

func (s *realSmoke) routes(ctx context.Context) (string, error) {
	var got []string
	err := eventually(ctx, func(ctx context.Context) error {
		got = got[:0]
		for _, n := range s.c.Nodes {
			r, cidr, err := s.routeOf(ctx, n.Name)
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("node %s: no route for its pod CIDR %q", n.Name, cidr)
			}
			got = append(got, cidr+" -> "+n.Name)
		}
		return nil
	})
	return strings.Join(got, ", "), err
}

// podToPodWorks checks that each probe reaches the probe of another node, which
// answers naming itself.
func (s *realSmoke) podToPodWorks(ctx context.Context) (string, error) {
	if len(s.probes) < 2 {
		return "one node: nothing across nodes", nil
	}
	var got []string
	for _, pr := range s.pairs() {
		if err := s.reaches(ctx, pr[0], pr[1]); err != nil {
			return "", err
		}
		got = append(got, pr[0].node+" -> "+pr[1].node)
	}
	return strings.Join(got, ", "), nil
}

// reaches waits until from's GET to to's pod IP is answered by to.
func (s *realSmoke) reaches(ctx context.Context, from, to probe) error {
	return eventually(ctx, func(ctx context.Context) error {
		a, err := s.get(ctx, from.pod, podURL(to.ip))
		if err != nil {
			return fmt.Errorf("%s -> %s %s: %w", from.node, to.node, to.ip, err)
		}
		if a.Pod != to.pod || a.Node != to.node {
			return fmt.Errorf("%s -> %s: answered by %s on %s", from.node, to.ip, a.Pod, a.Node)
		}
		return nil
	})
}

// routeDeleted deletes, through the cloud's API, the route to the second node's pod CIDR
// and checks that the first node's probe no longer reaches it. It deletes it just after
// the route controller listed the routes, so the controller's next look is a whole
// period away.
func (s *realSmoke) routeDeleted(ctx context.Context) (string, error) {
	if len(s.probes) < 2 {
		return "one node: nothing across nodes", nil
	}
	from, to := s.probes[0], s.probes[1]
	r, cidr, err := s.routeOf(ctx, to.node)
	if err != nil {
		return "", err
	}
	if r == nil {
		return "", fmt.Errorf("no route to %s's pod CIDR %s to delete", to.node, cidr)
	}
	before, err := s.c.Cloud.CallCounts(ctx)
	if err != nil {
		return "", err
	}
	err = eventually(ctx, func(ctx context.Context) error {
		now, err := s.c.Cloud.CallCounts(ctx)
		if err != nil {
			return err
		}
		for _, n := range now.Since(before)["routes.list"] {
			if n > 0 {
				return nil
			}
		}
		return errors.New("the route controller has not listed the routes yet")
	})
	if err != nil {
		return "", err
	}
	if err := s.c.Cloud.DeleteRoute(ctx, clusterName, r.Name); err != nil {
		return "", fmt.Errorf("delete route %s: %w", r.Name, err)
	}
	_, err = s.get(ctx, from.pod, podURL(to.ip))
	var ge *getError
	if !errors.As(err, &ge) {
		return "", fmt.Errorf("%s -> %s %s with its route deleted: want the GET to fail on the network, got %v", from.node, to.node, to.ip, err)
	}
	return fmt.Sprintf("route %s (%s -> %s) deleted; %s -> %s: %s", r.Name, cidr, to.node, from.node, to.ip, ge.msg), nil
}

// routeRestored waits until the route controller has created the route again and the
// first node's probe reaches the second's.
func (s *realSmoke) routeRestored(ctx context.Context) (string, error) {
	if len(s.probes) < 2 {
		return "one node: nothing across nodes", nil
	}
	start := time.Now()
	from, to := s.probes[0], s.probes[1]
	err := eventually(ctx, func(ctx context.Context) error {
		r, cidr, err := s.routeOf(ctx, to.node)
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("no route to %s's pod CIDR %s yet", to.node, cidr)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	took := time.Since(start)
	if err := s.reaches(ctx, from, to); err != nil {
		return "", err
	}
	return fmt.Sprintf("route back after %.1fs; %s -> %s answered again", took.Seconds(), from.node, to.node), nil
}

// deployment runs two demo pods per node, spread over the nodes.
func (s *realSmoke) deployment(ctx context.Context) (string, error) {
	labels := map[string]string{"app": smokeName}
	replicas := int32(2 * len(s.c.Nodes))
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: smokeName, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{demoContainer()},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname,
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](5),
				},
			},
		},
	}
	if _, err := s.c.Env.Client.AppsV1().Deployments(smokeNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Deployment: %w", err)
	}
	var perNode map[string]int
	err := eventually(ctx, func(ctx context.Context) error {
		ready, err := s.readyPods(ctx)
		if err != nil {
			return err
		}
		perNode = map[string]int{}
		for _, p := range ready {
			perNode[p.Spec.NodeName]++
		}
		if int32(len(ready)) != replicas || len(perNode) != len(s.c.Nodes) {
			return fmt.Errorf("%d of %d pods Ready, on %d of %d nodes", len(ready), replicas, len(perNode), len(s.c.Nodes))
		}
		return nil
	})
	return fmt.Sprintf("%d pods: %s", replicas, countsByNode(perNode)), err
}

// readyPods returns the Deployment's pods that are Ready.
func (s *realSmoke) readyPods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := s.c.Env.Client.CoreV1().Pods(smokeNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(map[string]string{"app": smokeName}).String(),
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !podReady(&p) }), nil
}

func countsByNode(m map[string]int) string {
	var parts []string
	for n, c := range m {
		parts = append(parts, fmt.Sprintf("%s %d", n, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (s *realSmoke) ingressIP(ctx context.Context) (string, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: smokeName},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": smokeName},
			// Local: kube-proxy sends node-port traffic to the node's own pods only, and
			// its health check node port tells the cloud which nodes have one.
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: demoPort, TargetPort: intstr.FromInt32(demoPort)}},
		},
	}
	services := s.c.Env.Client.CoreV1().Services(smokeNamespace)
	if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Service: %w", err)
	}
	err := eventually(ctx, func(ctx context.Context) error {
		got, err := services.Get(ctx, smokeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.hcPort = got.Spec.HealthCheckNodePort
		for _, ing := range got.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				s.vip = ing.IP
				return nil
			}
		}
		return errors.New("no ingress IP in the Service's status yet")
	})
	return fmt.Sprintf("%s, health check node port %d", s.vip, s.hcPort), err
}

// loadBalancer waits until the cloud's load balancer of the smoke Service has the VIP, a
// backend on every node still in the cluster, and healthy(backend) holds for each.
func (s *realSmoke) loadBalancer(ctx context.Context, nodes []string, healthy func(api.BackendStatus) error) (api.LoadBalancer, error) {
	var lb api.LoadBalancer
	err := eventually(ctx, func(ctx context.Context) error {
		lbs, err := s.c.Cloud.ListLoadBalancers(ctx, clusterName)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(lbs, func(lb api.LoadBalancer) bool { return lb.Spec.Service == smokeNamespace+"/"+smokeName })
		if i < 0 {
			return fmt.Errorf("no load balancer for %s/%s among %d", smokeNamespace, smokeName, len(lbs))
		}
		lb = lbs[i]
		if lb.Spec.HealthCheckNodePort != s.hcPort || s.hcPort == 0 {
			return fmt.Errorf("load balancer %s health-checks port %d, the Service's health check node port is %d", lb.Name, lb.Spec.HealthCheckNodePort, s.hcPort)
		}
		if lb.Status.VIP != s.vip {
			return fmt.Errorf("load balancer %s has VIP %s, the Service says %s", lb.Name, lb.Status.VIP, s.vip)
		}
		var have []string
		for _, b := range lb.Status.Backends {
			have = append(have, b.NodeName)
			if err := healthy(b); err != nil {
				return err
			}
		}
		sort.Strings(have)
		if !slices.Equal(have, nodes) {
			return fmt.Errorf("load balancer %s has backends %v, want %v", lb.Name, have, nodes)
		}
		return nil
	})
	s.lbName = lb.Name
	return lb, err
}

// clusterNodes are the names of the nodes still in the cluster, sorted.
func (s *realSmoke) clusterNodes() []string {
	var out []string
	for _, n := range s.c.Nodes {
		if n.Name != s.lost {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

func describeBackends(lb api.LoadBalancer) string {
	var parts []string
	for _, b := range lb.Status.Backends {
		parts = append(parts, fmt.Sprintf("%s %s", b.NodeName, b.Health))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (s *realSmoke) everyBackendHealthy(ctx context.Context) (string, error) {
	lb, err := s.loadBalancer(ctx, s.clusterNodes(), func(b api.BackendStatus) error {
		if b.Health != api.HealthHealthy {
			return fmt.Errorf("backend %s (%s) is %s", b.NodeName, b.Address, b.Health)
		}
		return nil
	})
	return fmt.Sprintf("%s: %s", lb.Name, describeBackends(lb)), err
}

// getVIP makes one request through the VIP.
func (s *realSmoke) getVIP(ctx context.Context) (demoAnswer, error) {
	url := "http://" + net.JoinHostPort(s.vip, strconv.Itoa(demoPort)) + "/"
	var a demoAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return a, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return a, err
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("GET %s: %s %q", url, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("GET %s: %q: %w", url, raw, err)
	}
	return a, nil
}

// vipReachesEveryNode sends requests through the VIP until pods on every node have
// answered; every answer must name a pod of the Deployment on the node it runs on.
func (s *realSmoke) vipReachesEveryNode(ctx context.Context) (string, error) {
	ready, err := s.readyPods(ctx)
	if err != nil {
		return "", err
	}
	where := map[string]string{}
	for _, p := range ready {
		where[p.Name] = p.Spec.NodeName
	}
	seen := map[string]int{}
	for i := 0; i < vipRequests && len(seen) < len(s.c.Nodes); i++ {
		a, err := s.getVIP(ctx)
		if err != nil {
			return "", err
		}
		if where[a.Pod] == "" || where[a.Pod] != a.Node {
			return "", fmt.Errorf("answered by pod %q on node %q, not a Ready pod of the Deployment on it", a.Pod, a.Node)
		}
		seen[a.Node]++
	}
	if len(seen) < len(s.c.Nodes) {
		return "", fmt.Errorf("after %d requests only nodes %s answered", vipRequests, countsByNode(seen))
	}
	return "answers by node: " + countsByNode(seen), nil
}

func (s *realSmoke) kubectlLogs(ctx context.Context) (string, error) {
	ready, err := s.readyPods(ctx)
	if err != nil || len(ready) == 0 {
		return "", fmt.Errorf("no Ready pod (%v)", err)
	}
	pod := ready[0]
	out, err := s.kubectl(ctx, "logs", pod.Name)
	if err != nil {
		return "", err
	}
	want := "demo-http: serving on :8080 as pod " + pod.Name + " on node " + pod.Spec.NodeName
	if !strings.Contains(out, want) {
		return "", fmt.Errorf("kubectl logs %s: %q does not say %q", pod.Name, out, want)
	}
	return fmt.Sprintf("%s on %s: %q", pod.Name, pod.Spec.NodeName, strings.TrimSpace(out)), nil
}

func (s *realSmoke) kubectlExec(ctx context.Context) (string, error) {
	ready, err := s.readyPods(ctx)
	if err != nil || len(ready) == 0 {
		return "", fmt.Errorf("no Ready pod (%v)", err)
	}
	pod := ready[len(ready)-1]
	a, err := s.get(ctx, pod.Name, podURL("127.0.0.1"))
	if err != nil {
		return "", err
	}
	if a.Pod != pod.Name {
		return "", fmt.Errorf("kubectl exec %s: answered by %q", pod.Name, a.Pod)
	}
	return fmt.Sprintf("kubectl exec %s -- /demo-http get http://127.0.0.1:8080/: answered by %s on %s", pod.Name, a.Pod, a.Node), nil
}

// scaledToOne scales the Deployment to one replica and checks that the cloud's health
// checks (kube-proxy's health check node port) find only that pod's node healthy, and
// that every request through the VIP lands there.
func (s *realSmoke) scaledToOne(ctx context.Context) (string, error) {
	scale, err := s.c.Env.Client.AppsV1().Deployments(smokeNamespace).GetScale(ctx, smokeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	scale.Spec.Replicas = 1
	if _, err := s.c.Env.Client.AppsV1().Deployments(smokeNamespace).UpdateScale(ctx, smokeName, scale, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("scale to 1: %w", err)
	}
	err = eventually(ctx, func(ctx context.Context) error {
		list, err := s.c.Env.Client.CoreV1().Pods(smokeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + smokeName})
		if err != nil {
			return err
		}
		ready, _ := s.readyPods(ctx)
		if len(list.Items) != 1 || len(ready) != 1 {
			return fmt.Errorf("%d pods, %d Ready; want one", len(list.Items), len(ready))
		}
		s.serving = ready[0].Spec.NodeName
		return nil
	})
	if err != nil {
		return "", err
	}
	lb, err := s.loadBalancer(ctx, s.clusterNodes(), func(b api.BackendStatus) error {
		want := api.HealthUnhealthy
		if b.NodeName == s.serving {
			want = api.HealthHealthy
		}
		if b.Health != want {
			return fmt.Errorf("backend %s is %s, want %s", b.NodeName, b.Health, want)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	// What the cloud's health checks ask: kube-proxy's health check server on each node.
	var hc []string
	for _, n := range s.c.Nodes {
		code, err := s.healthz(ctx, n.Address.String())
		if err != nil {
			return "", err
		}
		want := http.StatusServiceUnavailable // no local endpoint
		if n.Name == s.serving {
			want = http.StatusOK
		}
		if code != want {
			return "", fmt.Errorf("kube-proxy on %s answers %d on its health check node port %d, want %d", n.Name, code, s.hcPort, want)
		}
		hc = append(hc, fmt.Sprintf("%s %d", n.Name, code))
	}
	const requests = 20
	for range requests {
		a, err := s.getVIP(ctx)
		if err != nil {
			return "", err
		}
		if a.Node != s.serving {
			return "", fmt.Errorf("answered on %s, want only %s", a.Node, s.serving)
		}
	}
	return fmt.Sprintf("pod on %s; kube-proxy's /healthz on port %d: %s; cloud: %s; %d of %d requests answered there",
		s.serving, s.hcPort, strings.Join(hc, ", "), describeBackends(lb), requests, requests), nil
}

// healthz asks kube-proxy's health check server on a node's address about the smoke
// Service, as the cloud's health checks do, and returns the status code.
func (s *realSmoke) healthz(ctx context.Context, addr string) (int, error) {
	url := "http://" + net.JoinHostPort(addr, strconv.Itoa(int(s.hcPort))) + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, nil
}

// nodeInstance returns the cluster's node named name.
func (s *realSmoke) nodeInstance(name string) (localcluster.Node, error) {
	for _, n := range s.c.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return localcluster.Node{}, fmt.Errorf("no node %s", name)
}

// terminate terminates the instance of the node serving the one replica: its host
// stops, its kubelet with it, and kube-controller-manager marks the Node NotReady. The
// local provider reports a terminated instance NotFound, as the big clouds' do.
func (s *realSmoke) terminate(ctx context.Context) (string, error) {
	if len(s.c.Nodes) < 2 {
		return "", errors.New("one node: no other node for its pod to come back on (run with --nodes 2 or more)")
	}
	n, err := s.nodeInstance(s.serving)
	if err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := s.c.Cloud.TerminateInstance(ctx, n.InstanceID); err != nil {
		return "", fmt.Errorf("terminate instance %s of %s: %w", n.InstanceID, n.Name, err)
	}
	s.lost = n.Name
	err = eventually(ctx, func(ctx context.Context) error {
		node, err := s.c.Env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // already deleted, not Ready for sure: the next check sees it
		}
		if err != nil {
			return err
		}
		if localcluster.IsReady(node) {
			return fmt.Errorf("node %s still Ready", n.Name)
		}
		return nil
	})
	return fmt.Sprintf("instance %s of %s terminated; NotReady after %.1fs", n.InstanceID, n.Name, time.Since(start).Seconds()), err
}

// nodeDeleted waits for the lifecycle controller to delete the Node of the terminated
// instance: the cloud says NotFound on two rounds its grace period apart.
func (s *realSmoke) nodeDeleted(ctx context.Context) (string, error) {
	n, err := s.nodeInstance(s.lost)
	if err != nil {
		return "", err
	}
	start := time.Now()
	err = eventually(ctx, func(ctx context.Context) error {
		_, err := s.c.Env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s still there (%v)", n.Name, err)
	})
	return fmt.Sprintf("Node %s deleted %.1fs later", n.Name, time.Since(start).Seconds()), err
}

// podBack waits until the Deployment's replica runs again on another node, and the load
// balancer sends the VIP's traffic there.
func (s *realSmoke) podBack(ctx context.Context) (string, error) {
	var pod corev1.Pod
	err := eventually(ctx, func(ctx context.Context) error {
		ready, err := s.readyPods(ctx)
		if err != nil {
			return err
		}
		ready = slices.DeleteFunc(ready, func(p corev1.Pod) bool { return p.Spec.NodeName == s.lost })
		if len(ready) != 1 {
			return fmt.Errorf("%d Ready pods on the remaining nodes, want 1", len(ready))
		}
		pod = ready[0]
		return nil
	})
	if err != nil {
		return "", err
	}
	if _, err := s.loadBalancer(ctx, s.clusterNodes(), func(b api.BackendStatus) error {
		if b.NodeName == pod.Spec.NodeName && b.Health != api.HealthHealthy {
			return fmt.Errorf("backend %s is %s", b.NodeName, b.Health)
		}
		return nil
	}); err != nil {
		return "", err
	}
	var a demoAnswer
	err = eventually(ctx, func(ctx context.Context) error {
		var err error
		a, err = s.getVIP(ctx)
		if err == nil && a.Pod != pod.Name {
			err = fmt.Errorf("answered by %s, want %s", a.Pod, pod.Name)
		}
		return err
	})
	return fmt.Sprintf("%s on %s answers through %s", a.Pod, a.Node, s.vip), err
}

func (s *realSmoke) deleteService(ctx context.Context) (string, error) {
	return deleteSmokeService(ctx, s.c.Env.Client, s.c.Cloud, s.lbName)
}

func (s *realSmoke) listenerClosed(ctx context.Context) (string, error) {
	return listenerClosed(ctx, net.JoinHostPort(s.vip, strconv.Itoa(demoPort)))
}

// reportResources prints what each remaining node's components use.
func (s *realSmoke) reportResources(out io.Writer) {
	for _, n := range s.c.Nodes {
		if n.Name == s.lost {
			continue
		}
		st, err := s.c.NodeStatus(n.Name)
		if err != nil {
			continue
		}
		var parts []string
		for _, comp := range []string{"kubelet", "containerd", "kube-proxy"} {
			parts = append(parts, fmt.Sprintf("%s %.0f MiB", comp, rssMiB(st.PIDs[comp])))
		}
		fmt.Fprintf(out, "  node %s RSS: %s; booted to Running in %s\n", n.Name, strings.Join(parts, ", "),
			time.Duration(st.Steps["proxyStarted"]).Round(100*time.Millisecond))
	}
}

// rssMiB is a process's resident memory in MiB, 0 if it is gone.
func rssMiB(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil || pid <= 0 {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}
