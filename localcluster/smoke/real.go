package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcluster"
)

// realChecks are the checks of a cluster of real nodes: those before the CCM runs, and
// those after.
func (s *smoke) realChecks() (before, after []check) {
	before = []check{
		{"a probe pod runs on every node (tolerating the uninitialized taint)", s.probesRun},
		{"pod-to-pod across nodes fails: no route in the cloud yet", s.podToPodFails},
	}
	after = append(s.nodeChecks(),
		check{"every node's pod CIDR routed in the local cloud", s.routes},
		check{"pod-to-pod across nodes works through the routes", s.podToPodWorks},
		check{"a route deleted behind the controller's back breaks pod-to-pod", s.routeDeleted},
		check{"the route controller's drift check restores it", s.routeRestored},
		check{"a Deployment of the demo server runs pods on every node", s.deployment},
		check{"Service " + Namespace + "/" + ServiceName + " (LoadBalancer, externalTrafficPolicy Local) gets an ingress IP", s.demoService},
		check{"the cloud's load balancer health-checks kube-proxy: every node healthy", s.everyBackendHealthy},
		check{"HTTP through the VIP reaches pods on every node", s.vipReachesEveryNode},
		check{"the VIP keeps the client's address (ipMode VIP): pods see the machine's, outside the nodes' range", s.clientKept},
		check{"a pod reaches the Service through the VIP (kube-proxy serves it in the node)", s.podReachesVIP},
		check{"nephele migrate check passes", s.migrateCheck},
		check{"kubectl logs shows a pod's log", s.kubectlLogs},
		check{"kubectl exec runs a command in a pod", s.kubectlExec},
		check{"an unprivileged user reads no credential and plants nothing in the state directory", s.nobodyReadsNothing},
		check{"etcd answers no client without its certificate, and no pod reaches it", s.storeRefusesStrangers},
		check{"the registry takes no push or delete but nephele up's, from the machine or a pod", s.registryRefusesPushes},
		check{"the CCM's cloud credential makes no instance and sets no fault; a pod without one gets 401", s.cloudRefusesTheCCMsCredential},
		check{"a pod resolves the Service's name through cluster DNS and reaches it", s.dnsResolvesService},
		check{"scaled to one replica, only its node is healthy and answers", s.scaledToOne},
	)
	if s.cfg.Volumes {
		// Before a node is terminated: the volumes move between all of them.
		after = append(after, s.volumeChecks()...)
	}
	after = append(after,
		check{"terminating that node's instance: its Node goes NotReady", s.terminate},
		check{"the lifecycle controller deletes the terminated instance's Node", s.nodeDeleted},
		check{"the pod comes back on another node and answers through the VIP", s.podBack},
		check{"deleting the Service deletes the cloud load balancer", s.deleteService},
		// Nothing listens on a VIP of real nodes: the cloud refuses what no load balancer takes.
		check{"connecting to the VIP is refused", s.listenerClosed(demoPort)},
	)
	if s.cfg.CCM == localcluster.CCMOperator {
		after = append(after, check{"the operator copies no Secret from outside its config namespace", s.operatorCopiesNoForeignSecret})
	}
	return before, after
}

// demoService creates the Service in front of the demo Deployment and waits for its VIP.
func (s *smoke) demoService(ctx context.Context) (string, error) {
	return s.createService(ctx, []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: demoPort, TargetPort: intstr.FromInt32(demoPort)}})
}

// getDemo makes one request through the VIP and decodes the demo server's answer.
func (s *smoke) getDemo(ctx context.Context) (demoAnswer, error) { return s.getDemoAt(ctx, s.vip) }

// getDemoAt makes one request to the demo server through vip and decodes its answer.
func (s *smoke) getDemoAt(ctx context.Context, vip string) (demoAnswer, error) {
	var a demoAnswer
	raw, err := s.getAt(ctx, vip, demoPort)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("through VIP %s: %q: %w", vip, raw, err)
	}
	return a, nil
}

// Objects of the smoke checks on real nodes, all in Namespace.
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

// probe is a pod bound to one node, for pod-to-pod traffic. owned is whether a cloud
// of the CCM owns the node: nothing routes to a hybrid cluster's unowned node.
type probe struct {
	pod, node, ip string
	owned         bool
}

// demoAnswer is what the demo HTTP server answers (cmd/demo-http's Answer).
type demoAnswer struct {
	Pod   string `json:"pod"`
	PodIP string `json:"podIP"`
	Node  string `json:"node"`
	// Client is the address the request came from, as the pod saw it.
	Client string `json:"client"`
}

// kubectl runs bin/kubectl as the admin and returns its standard output; a failure
// carries its standard error.
func (s *smoke) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.c.Kubectl, append([]string{"--kubeconfig", s.c.Env.Kubeconfig, "--namespace", Namespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// get makes pod GET url with the demo server's client, through kubectl exec, and
// decodes the answer. A failure of the GET itself (not of kubectl) is a *getError.
func (s *smoke) execGet(ctx context.Context, pod, url string) (demoAnswer, error) {
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
func (s *smoke) probesRun(ctx context.Context) (string, error) {
	pods := s.c.Env.Client.CoreV1().Pods(Namespace)
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
		err := s.eventually(ctx, func(ctx context.Context) error {
			_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		s.probes = append(s.probes, probe{pod: pod.Name, node: n.Name, owned: n.Owned()})
	}
	err := s.eventually(ctx, func(ctx context.Context) error {
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

// pairs are the probes of owned nodes and the probe of the next such node, each node to
// another (in a hybrid cluster, across the clouds both ways).
func (s *smoke) pairs() [][2]probe {
	owned := slices.DeleteFunc(slices.Clone(s.probes), func(p probe) bool { return !p.owned })
	var out [][2]probe
	for i, p := range owned {
		if len(owned) > 1 {
			out = append(out, [2]probe{p, owned[(i+1)%len(owned)]})
		}
	}
	return out
}

// podToPodFails checks that no probe reaches the probe of another node: without a route
// to its pod CIDR the traffic goes to the machine, which sends it nowhere.
func (s *smoke) podToPodFails(ctx context.Context) (string, error) {
	if len(s.pairs()) == 0 {
		return "one node: nothing across nodes", nil
	}
	var last string
	for _, pr := range s.pairs() {
		_, err := s.execGet(ctx, pr[0].pod, podURL(pr[1].ip))
		var ge *getError
		if !errors.As(err, &ge) {
			return "", fmt.Errorf("%s -> %s %s: want the GET to fail on the network, got %v", pr[0].node, pr[1].node, pr[1].ip, err)
		}
		last = fmt.Sprintf("%s -> %s: %s", pr[0].node, pr[1].ip, ge.msg)
	}
	return last, nil
}

// podToPodWorks checks that each probe reaches the probe of another node, which
// answers naming itself.
func (s *smoke) podToPodWorks(ctx context.Context) (string, error) {
	if len(s.pairs()) == 0 {
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
func (s *smoke) reaches(ctx context.Context, from, to probe) error {
	return s.eventually(ctx, func(ctx context.Context) error {
		a, err := s.execGet(ctx, from.pod, podURL(to.ip))
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
func (s *smoke) routeDeleted(ctx context.Context) (string, error) {
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
	// On a loaded machine the GET can outlast the period, and the drift check put the
	// route back before it: then it is deleted again, after the next listing.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if err := s.deleteRouteAfterListing(ctx, r.Name); err != nil {
			return "", err
		}
		_, err = s.execGet(ctx, from.pod, podURL(to.ip))
		var ge *getError
		if errors.As(err, &ge) {
			return fmt.Sprintf("route %s (%s -> %s) deleted; %s -> %s: %s", r.Name, cidr, to.node, from.node, to.ip, ge.msg), nil
		}
		back, _, rerr := s.routeOf(ctx, to.node)
		if rerr != nil || back == nil || attempt == attempts {
			return "", fmt.Errorf("%s -> %s %s with its route deleted: want the GET to fail on the network, got %v", from.node, to.node, to.ip, err)
		}
		r = back
	}
}

// deleteRouteAfterListing deletes the route named name through the cloud's API just
// after the route controller listed the routes, so that its next look is a whole period
// away.
func (s *smoke) deleteRouteAfterListing(ctx context.Context, name string) error {
	before, err := s.c.Cloud.CallCounts(ctx)
	if err != nil {
		return err
	}
	err = s.eventually(ctx, func(ctx context.Context) error {
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
		return err
	}
	if err := s.c.Cloud.DeleteRoute(ctx, s.cfg.ClusterName, name); err != nil {
		return fmt.Errorf("delete route %s: %w", name, err)
	}
	return nil
}

// routeRestored waits until the route controller has created the route again and the
// first node's probe reaches the second's.
func (s *smoke) routeRestored(ctx context.Context) (string, error) {
	if len(s.probes) < 2 {
		return "one node: nothing across nodes", nil
	}
	start := time.Now()
	from, to := s.probes[0], s.probes[1]
	err := s.eventually(ctx, func(ctx context.Context) error {
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
func (s *smoke) deployment(ctx context.Context) (string, error) {
	labels := map[string]string{"app": ServiceName}
	nodes := len(s.ownedNodes())
	replicas := int32(2 * nodes)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Labels: labels},
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
						// A hybrid cluster's unowned node keeps its taint: it is no place
						// for a pod, and must not count as an empty one.
						NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](5),
				},
			},
		},
	}
	if _, err := s.c.Env.Client.AppsV1().Deployments(Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Deployment: %w", err)
	}
	var perNode map[string]int
	err := s.eventually(ctx, func(ctx context.Context) error {
		ready, err := s.readyPods(ctx)
		if err != nil {
			return err
		}
		perNode = map[string]int{}
		for _, p := range ready {
			perNode[p.Spec.NodeName]++
		}
		if int32(len(ready)) != replicas || len(perNode) != nodes {
			return fmt.Errorf("%d of %d pods Ready, on %d of %d nodes", len(ready), replicas, len(perNode), nodes)
		}
		return nil
	})
	return fmt.Sprintf("%d pods: %s", replicas, countsByNode(perNode)), err
}

// readyPods returns the Deployment's pods that are Ready.
func (s *smoke) readyPods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := s.c.Env.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(map[string]string{"app": ServiceName}).String(),
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

// vipReachesEveryNode sends requests through the VIP until pods on every node have
// answered; every answer must name a pod of the Deployment on the node it runs on.
func (s *smoke) vipReachesEveryNode(ctx context.Context) (string, error) {
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
		a, err := s.getDemo(ctx)
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

// clientKept checks that the Service's ingress has ipMode VIP and that the pods answering
// through the VIP see this machine's source address for VIPs (the local cloud routes the
// connection to a node unchanged; kube-proxy keeps the source for externalTrafficPolicy
// Local), outside the nodes' /16, as upstream's source-IP test wants.
func (s *smoke) clientKept(ctx context.Context) (string, error) {
	svc, err := s.c.Env.Client.CoreV1().Services(Namespace).Get(ctx, ServiceName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == s.vip && (ing.IPMode == nil || *ing.IPMode != corev1.LoadBalancerIPModeVIP) {
			return "", fmt.Errorf("the Service's ingress %s has ipMode %v, want VIP", ing.IP, ing.IPMode)
		}
	}
	want := hosts.VIPSource(s.cfg.VIPPool)
	nodes, _ := s.cfg.InstanceCIDR.Addr().Prefix(16)
	if nodes.Contains(want) {
		return "", fmt.Errorf("the machine's source address %s is inside the nodes' %s", want, nodes)
	}
	var a demoAnswer
	err = s.eventually(ctx, func(ctx context.Context) error {
		a, err = s.getDemo(ctx)
		if err != nil {
			return err
		}
		if host, _, _ := net.SplitHostPort(a.Client); host != want.String() {
			return fmt.Errorf("pod %s on %s saw the client %s, want %s", a.Pod, a.Node, a.Client, want)
		}
		return nil
	})
	return fmt.Sprintf("pod %s on %s saw %s", a.Pod, a.Node, a.Client), err
}

// podReachesVIP checks that a probe pod reaches the Service at its VIP, which kube-proxy
// in the pod's node serves (ipMode VIP), and that the answering pod sees the probe's own
// address (externalTrafficPolicy Local: pod traffic goes to any endpoint, unmasqueraded).
func (s *smoke) podReachesVIP(ctx context.Context) (string, error) {
	if len(s.probes) == 0 {
		return "", errors.New("no probe pod")
	}
	from := s.probes[0]
	url := "http://" + net.JoinHostPort(s.vip, strconv.Itoa(demoPort)) + "/"
	var a demoAnswer
	err := s.eventually(ctx, func(ctx context.Context) error {
		var err error
		if a, err = s.execGet(ctx, from.pod, url); err != nil {
			return fmt.Errorf("%s on %s -> %s: %w", from.pod, from.node, url, err)
		}
		if host, _, _ := net.SplitHostPort(a.Client); host != from.ip {
			return fmt.Errorf("pod %s saw the client %s, want the probe's %s", a.Pod, a.Client, from.ip)
		}
		return nil
	})
	return fmt.Sprintf("%s on %s -> %s: answered by %s on %s", from.pod, from.node, url, a.Pod, a.Node), err
}

func (s *smoke) kubectlLogs(ctx context.Context) (string, error) {
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

func (s *smoke) kubectlExec(ctx context.Context) (string, error) {
	ready, err := s.readyPods(ctx)
	if err != nil || len(ready) == 0 {
		return "", fmt.Errorf("no Ready pod (%v)", err)
	}
	pod := ready[len(ready)-1]
	a, err := s.execGet(ctx, pod.Name, podURL("127.0.0.1"))
	if err != nil {
		return "", err
	}
	if a.Pod != pod.Name {
		return "", fmt.Errorf("kubectl exec %s: answered by %q", pod.Name, a.Pod)
	}
	return fmt.Sprintf("kubectl exec %s -- /demo-http get http://127.0.0.1:8080/: answered by %s on %s", pod.Name, a.Pod, a.Node), nil
}

// dnsResolvesService makes a pod GET the demo Service by its short name, which only
// cluster DNS resolves (the pod's search path completes it to
// <name>.<namespace>.svc.cluster.local), and checks the fully qualified name too.
func (s *smoke) dnsResolvesService(ctx context.Context) (string, error) {
	ready, err := s.readyPods(ctx)
	if err != nil || len(ready) == 0 {
		return "", fmt.Errorf("no Ready pod (%v)", err)
	}
	pod := ready[0]
	var answers []string
	for _, host := range []string{ServiceName, ServiceName + "." + Namespace + ".svc." + localcluster.ClusterDomain} {
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(demoPort)) + "/"
		a, err := s.execGet(ctx, pod.Name, url)
		if err != nil {
			return "", fmt.Errorf("from pod %s: GET %s: %w", pod.Name, url, err)
		}
		answers = append(answers, host+" answered by "+a.Pod)
	}
	return "from " + pod.Name + ": " + strings.Join(answers, "; "), nil
}

// scaledToOne scales the Deployment to one replica and checks that the cloud's health
// checks (kube-proxy's health check node port) find only that pod's node healthy, and
// that every request through the VIP lands there.
func (s *smoke) scaledToOne(ctx context.Context) (string, error) {
	scale, err := s.c.Env.Client.AppsV1().Deployments(Namespace).GetScale(ctx, ServiceName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	scale.Spec.Replicas = 1
	if _, err := s.c.Env.Client.AppsV1().Deployments(Namespace).UpdateScale(ctx, ServiceName, scale, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("scale to 1: %w", err)
	}
	err = s.eventually(ctx, func(ctx context.Context) error {
		list, err := s.c.Env.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + ServiceName})
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
	lb, err := s.loadBalancer(ctx, func(b api.BackendStatus) error {
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
		a, err := s.getDemo(ctx)
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
func (s *smoke) healthz(ctx context.Context, addr string) (int, error) {
	return s.status(ctx, s.http, http.MethodGet, "http://"+net.JoinHostPort(addr, strconv.Itoa(int(s.hcPort)))+"/healthz")
}

// nodeInstance returns the cluster's node named name.
func (s *smoke) nodeInstance(name string) (localcluster.Node, error) {
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
func (s *smoke) terminate(ctx context.Context) (string, error) {
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
	err = s.eventually(ctx, func(ctx context.Context) error {
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
func (s *smoke) nodeDeleted(ctx context.Context) (string, error) {
	n, err := s.nodeInstance(s.lost)
	if err != nil {
		return "", err
	}
	start := time.Now()
	err = s.eventually(ctx, func(ctx context.Context) error {
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
func (s *smoke) podBack(ctx context.Context) (string, error) {
	var pod corev1.Pod
	err := s.eventually(ctx, func(ctx context.Context) error {
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
	if _, err := s.loadBalancer(ctx, func(b api.BackendStatus) error {
		if b.NodeName == pod.Spec.NodeName && b.Health != api.HealthHealthy {
			return fmt.Errorf("backend %s is %s", b.NodeName, b.Health)
		}
		return nil
	}); err != nil {
		return "", err
	}
	var a demoAnswer
	err = s.eventually(ctx, func(ctx context.Context) error {
		var err error
		a, err = s.getDemo(ctx)
		if err == nil && a.Pod != pod.Name {
			err = fmt.Errorf("answered by %s, want %s", a.Pod, pod.Name)
		}
		return err
	})
	return fmt.Sprintf("%s on %s answers through %s", a.Pod, a.Node, s.vip), err
}

// reportResources prints what each remaining node's components use.
func (s *smoke) reportResources() {
	if s.cfg.NodeMode != localcluster.NodesReal {
		return
	}
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
		fmt.Fprintf(s.out, "  node %s RSS: %s; booted to Running in %s\n", n.Name, strings.Join(parts, ", "),
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
