package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcluster"
)

// Bounds of the end-to-end test: generous, so that a loaded two-core machine never
// fails it.
const (
	startTimeout = 5 * time.Minute
	// rolloutTimeout is above kube-scheduler's 5 minutes after which it retries a pod it
	// found unschedulable in any case: a replaced pod whose place frees up is normally
	// retried at once, and the test reports how long the rollout took.
	rolloutTimeout = 7 * time.Minute
	// leaseDuration is the manager's default --leader-elect-lease-duration, the bound
	// of the leader gap during a rolling update.
	leaseDuration = 15 * time.Second
)

// demo names the LoadBalancer Service and its Deployment.
const (
	demoNamespace = "default"
	demoName      = "e2e-demo"
	demoPort      = 8080
)

// TestInCluster installs nephele's CCM into a real cluster the way docs/deploy.md tells
// users to, on two nodes for two replicas (fewer nodes than replicas + 1, so a rolling
// update must not surge), and checks everything issue 12 section 5 names; the audit log
// of the whole run then proves the RBAC least-privilege (audit_test.go) and the running
// components' flags are compared with docs/deploy.md (flags_test.go).
func TestInCluster(t *testing.T) {
	hoststest.RequireRoot(t)
	bin := clustertest.BinDir(t)
	c, auditLog := startAudited(t, "nphdp", bin, func(cfg *localcluster.Config) {
		cfg.CCM = localcluster.CCMInCluster
		cfg.DeferCCM = true // installed below, by kubectl
	})

	opts := c.CCMManifests()
	manifestArgs := []string{"manifests", "--cluster-name", opts.ClusterName, "--cluster-cidr", opts.ClusterCIDR}
	e := &inCluster{t: t, c: c, opts: opts, nephele: filepath.Join(bin, "nephele"), manifestArgs: manifestArgs}

	t.Run("flags of the components are the documented ones", e.componentFlags)
	t.Run("nephele manifests | kubectl apply -f - initializes the nodes from a pod", e.install)
	t.Run("a LoadBalancer Service carries traffic to pods", e.loadBalancer)
	t.Run("metrics through the Service: 200 with the metrics-reader role, 403 without", e.metrics)
	t.Run("a rolling image update keeps one leader with a gap under the lease", e.rollingUpdate)
	t.Run("kubectl delete -f leaves nothing behind", e.remove)
	if t.Failed() {
		return
	}
	// The audit log is whole once kube-apiserver has stopped.
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("stop the cluster: %v", err)
	}
	t.Run("every granted permission is used or documented", func(t *testing.T) {
		checkLeastPrivilege(t, auditLog, opts, e.removal)
	})
}

// startAudited starts a cluster of 2 real nodes (clustertest.Start, tweaked by tweak) whose
// kube-apiserver writes the audit log auditPolicy asks for, and returns it with the
// log's path. The log is whole once the cluster has stopped.
func startAudited(t *testing.T, prefix, bin string, tweak func(*localcluster.Config)) (*localcluster.Cluster, string) {
	t.Helper()
	dir := t.TempDir()
	auditLog := filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := clustertest.Start(t, prefix, bin, 2, func(cfg *localcluster.Config) {
		tweak(cfg)
		cfg.APIServerArgs = append(cfg.APIServerArgs, "--audit-policy-file="+policy, "--audit-log-path="+auditLog, "--audit-log-format=json")
	})
	return c, auditLog
}

// auditPolicy records the metadata of every request of a kube-system ServiceAccount
// (the CCM's identities among them), once, when the response is sent.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:kube-system"]
- level: None
`

type inCluster struct {
	t            *testing.T
	c            *localcluster.Cluster
	opts         render.Options
	nephele      string
	manifestArgs []string
	vip          string
	// removal is when `kubectl delete -f` began.
	removal time.Time
}

// pipe runs `nephele manifests ... | kubectl <verb> -f -`, as docs/deploy.md says.
func (e *inCluster) pipe(t *testing.T, ctx context.Context, verb string, extra ...string) string {
	t.Helper()
	manifests, err := exec.CommandContext(ctx, e.nephele, append(e.manifestArgs, extra...)...).Output()
	if err != nil {
		t.Fatalf("nephele %s: %v", strings.Join(e.manifestArgs, " "), err)
	}
	out, err := e.c.RunKubectl(ctx, strings.NewReader(string(manifests)), verb, "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *inCluster) install(t *testing.T) {
	ctx := t.Context()
	if err := e.c.CreateCloudConfigSecret(ctx, e.opts); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply:\n%s", e.pipe(t, ctx, "apply"))
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	holder, err := e.c.WaitInClusterCCM(wctx, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	pods := e.ccmPods(t)
	if len(pods) != e.opts.Replicas {
		t.Fatalf("%d CCM pods, want %d", len(pods), e.opts.Replicas)
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		if !p.Spec.HostNetwork || p.Spec.Containers[0].Image != render.DefaultImage {
			t.Errorf("pod %s: hostNetwork %v, image %s; want hostNetwork and %s", p.Name, p.Spec.HostNetwork, p.Spec.Containers[0].Image, render.DefaultImage)
		}
		if st := p.Status.ContainerStatuses; len(st) != 1 || !strings.Contains(st[0].ImageID, "sha256:") {
			t.Errorf("pod %s: no pulled image ID in %+v", p.Name, st)
		}
		nodes[p.Spec.NodeName] = true
	}
	// With hostNetwork, a replica's identity is its node's host name.
	leaderNode, _, _ := strings.Cut(holder, "_")
	if !nodes[leaderNode] {
		t.Errorf("the lease is held by %s, which is not a CCM pod's node (%v)", holder, nodes)
	}
	t.Logf("%d replicas on %v; %s leads", len(pods), nodes, holder)
	poll.EventuallyContext(t, "every node initialized by the in-cluster CCM", func(ctx context.Context) error {
		for _, n := range e.c.Nodes {
			node, err := e.c.Env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok, why := localcluster.Initialized(node); !ok {
				return fmt.Errorf("%s: %s", n.Name, why)
			}
		}
		return nil
	})
}

// ccmPods lists the CCM's pods that are not being deleted.
func (e *inCluster) ccmPods(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := e.c.Env.Client.CoreV1().Pods(e.opts.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nephele-ccm"})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

func (e *inCluster) loadBalancer(t *testing.T) {
	ctx := t.Context()
	client := e.c.Env.Client
	labels := map[string]string{"app": demoName}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: demoName, Namespace: demoNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "demo", Image: localcluster.DemoImage,
					Env: []corev1.EnvVar{
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
					},
					Ports: []corev1.ContainerPort{{ContainerPort: demoPort}},
				}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(demoNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: demoName, Namespace: demoNamespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(demoPort)}},
		},
	}
	if _, err := client.CoreV1().Services(demoNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.EventuallyContext(t, "the Service's ingress IP", func(ctx context.Context) error {
		s, err := client.CoreV1().Services(demoNamespace).Get(ctx, demoName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		e.vip = s.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	poll.EventuallyContext(t, "HTTP through the VIP reaches a demo pod", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(e.vip, "80")+"/", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), demoName) {
			return fmt.Errorf("%s: %q", resp.Status, body)
		}
		return nil
	})
}

func (e *inCluster) metrics(t *testing.T) {
	ctx := t.Context()
	client := e.c.Env.Client
	svc, err := client.CoreV1().Services(e.opts.Namespace).Get(ctx, render.DeploymentName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the metrics Service: %v", err)
	}
	// Two scrapers: one bound to the rendered metrics-reader ClusterRole, one not.
	for _, name := range []string{"e2e-scraper", "e2e-stranger"} {
		if _, err := client.CoreV1().ServiceAccounts(demoNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: render.MetricsReaderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "e2e-scraper", Namespace: demoNamespace}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	token := func(name string) string {
		tr, err := client.CoreV1().ServiceAccounts(demoNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(render.SecurePort))
	// The ClusterIP exists only where kube-proxy programs it: in a node.
	netns := e.nodeNetNS(t, e.c.Nodes[0].Name)
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"e2e-scraper", token("e2e-scraper"), http.StatusOK},
		{"e2e-stranger", token("e2e-stranger"), http.StatusForbidden},
		{"no token", "", http.StatusUnauthorized},
	} {
		var body string
		poll.EventuallyContext(t, fmt.Sprintf("GET https://%s/metrics as %s answers %d", addr, tc.who, tc.want), func(ctx context.Context) error {
			code, b, err := getInNetNS(ctx, netns, addr, "/metrics", tc.token)
			if err != nil {
				return err
			}
			if code != tc.want {
				return fmt.Errorf("answered %d: %.200s", code, b)
			}
			body = b
			return nil
		})
		if tc.want == http.StatusOK && !strings.Contains(body, "nephele_") {
			t.Errorf("/metrics as %s has no nephele_ metric:\n%.500s", tc.who, body)
		}
	}
}

// nodeNetNS is the network namespace of a node: its kubelet's.
func (e *inCluster) nodeNetNS(t *testing.T, node string) string {
	t.Helper()
	st, err := e.c.NodeStatus(node)
	if err != nil {
		t.Fatal(err)
	}
	pid := st.PIDs["kubelet"]
	if pid <= 0 {
		t.Fatalf("node %s reports no kubelet process", node)
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid)
}

// getInNetNS makes an HTTPS GET of path at addr with token from inside the network
// namespace netns. The connection is opened there (a socket stays in the namespace it
// was made in); TLS is not verified, the CCM serves with a self-signed certificate.
func getInNetNS(ctx context.Context, netns, addr, path, token string) (int, string, error) {
	var conn net.Conn
	err := hoststest.InNetNS(netns, func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return 0, "", err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed; what is tested is authorization
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if conn == nil {
				return nil, fmt.Errorf("connection already used")
			}
			c := conn
			conn = nil
			return c, nil
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

func (e *inCluster) rollingUpdate(t *testing.T) {
	ctx := t.Context()
	// A second version of the CCM image, built from this tree as a release would be
	// (its version label and tag v2), pushed beside the first.
	out := t.TempDir()
	built, err := images.Build(ctx, images.BuildOptions{ModuleDir: clustertest.ModuleDir(t), OutDir: out, Source: images.Source{Version: "v2"}}, images.CloudControllerManager)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := e.c.Registry.PushArchive(ctx, built[0].Archive, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s %s", pushed.Ref, pushed.Digest)

	w := watchLease(t, e.c, e.opts.Namespace)
	if _, err := e.c.RunKubectl(ctx, nil, "-n", e.opts.Namespace, "set", "image", "deployment/"+render.DeploymentName, "cloud-controller-manager="+pushed.Ref); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if out, err := e.c.RunKubectl(ctx, nil, "-n", e.opts.Namespace, "rollout", "status", "deployment/"+render.DeploymentName, "--timeout="+rolloutTimeout.String()); err != nil {
		describe, _ := e.c.RunKubectl(ctx, nil, "-n", e.opts.Namespace, "describe", "pods", "-l", "app.kubernetes.io/name=nephele-ccm")
		events, _ := e.c.RunKubectl(ctx, nil, "get", "events", "-A", "--sort-by=.lastTimestamp")
		nodes, _ := e.c.RunKubectl(ctx, nil, "get", "nodes,pods", "-A", "-o", "wide")
		t.Fatalf("rollout: %v\n%s\n%s\n%s", err, describe, events, nodes)
	} else {
		t.Logf("rollout done in %s: %s", time.Since(began).Round(100*time.Millisecond), strings.TrimSpace(out))
	}
	for _, p := range e.ccmPods(t) {
		if p.Spec.Containers[0].Image != pushed.Ref {
			t.Errorf("pod %s runs %s after the rollout, want %s", p.Name, p.Spec.Containers[0].Image, pushed.Ref)
		}
	}
	// The new leader holds the lease and renews it.
	poll.EventuallyContext(t, "a v2 replica leads", func(ctx context.Context) error {
		obs := w.last()
		for _, p := range e.ccmPods(t) {
			if strings.HasPrefix(obs.holder, p.Spec.NodeName+"_") && p.Spec.Containers[0].Image == pushed.Ref {
				return nil
			}
		}
		return fmt.Errorf("the lease is held by %q", obs.holder)
	})
	terms := w.stop()
	gaps := leaderGaps(terms)
	if len(terms) < 2 {
		t.Errorf("the lease was held by %d leader terms during the rollout, want at least 2 (the leader's pod was replaced)", len(terms))
	}
	for i, g := range gaps {
		t.Logf("leader gap %d: %s -> %s: %s", i+1, terms[i].holder, terms[i+1].holder, g.Round(time.Millisecond))
		if g > leaseDuration {
			t.Errorf("leader gap %s, longer than the lease duration %s", g, leaseDuration)
		}
	}
	// Nodes and the load balancer still serve.
	if _, err := http.Get("http://" + net.JoinHostPort(e.vip, "80") + "/"); err != nil {
		t.Errorf("the VIP after the rollout: %v", err)
	}
}

// leaseTerm is one holder's time with the lease: when it acquired it and the last
// renewal seen.
type leaseTerm struct {
	holder            string
	acquired, renewed time.Time
}

// leaseWatch samples the CCM's Lease while a rollout runs.
type leaseWatch struct {
	mu     sync.Mutex
	terms  []leaseTerm
	cancel context.CancelFunc
	done   chan struct{}
}

// watchLease samples the Lease every 100ms until stop, recording each holder's term.
// An empty holder (a lease released on shutdown) is no term.
func watchLease(t *testing.T, c *localcluster.Cluster, namespace string) *leaseWatch {
	ctx, cancel := context.WithCancel(t.Context())
	w := &leaseWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			l, err := c.Env.Client.CoordinationV1().Leases(namespace).Get(ctx, render.LeaseName, metav1.GetOptions{})
			if err == nil && ptr.Deref(l.Spec.HolderIdentity, "") != "" && l.Spec.AcquireTime != nil && l.Spec.RenewTime != nil {
				w.observe(leaseTerm{holder: *l.Spec.HolderIdentity, acquired: l.Spec.AcquireTime.Time, renewed: l.Spec.RenewTime.Time})
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *leaseWatch) observe(o leaseTerm) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.terms); n > 0 && w.terms[n-1].holder == o.holder && w.terms[n-1].acquired.Equal(o.acquired) {
		w.terms[n-1].renewed = o.renewed
		return
	}
	w.terms = append(w.terms, o)
}

func (w *leaseWatch) last() leaseTerm {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.terms) == 0 {
		return leaseTerm{}
	}
	return w.terms[len(w.terms)-1]
}

func (w *leaseWatch) stop() []leaseTerm {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terms
}

// leaderGaps are the times between one term's last renewal and the next term's
// acquisition: how long no replica was known to lead.
func leaderGaps(terms []leaseTerm) []time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(terms); i++ {
		gaps = append(gaps, terms[i].acquired.Sub(terms[i-1].renewed))
	}
	return gaps
}

func (e *inCluster) remove(t *testing.T) {
	ctx := t.Context()
	client := e.c.Env.Client
	// docs/deploy.md: delete the LoadBalancer Services while the CCM still runs, so that
	// it deletes their load balancers and lets their finalizers go.
	if err := client.CoreV1().Services(demoNamespace).Delete(ctx, demoName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.EventuallyContext(t, "the Service gone (its finalizer let go)", func(ctx context.Context) error {
		_, err := client.CoreV1().Services(demoNamespace).Get(ctx, demoName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	e.removal = time.Now()
	t.Logf("kubectl delete:\n%s", e.pipe(t, ctx, "delete"))
	objs, err := render.Render(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	poll.EventuallyContext(t, "every rendered object and every CCM pod gone", func(ctx context.Context) error {
		var left []string
		for _, o := range objs {
			// kube-system/node-controller is kube-controller-manager's account too, which
			// it re-creates when it needs it (docs/deploy.md): what counts is an object
			// still labelled as nephele's.
			args := []string{"get", o.GetKind() + "." + o.GroupVersionKind().Group, o.GetName(), "--ignore-not-found",
				"-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/part-of}`}
			if o.GetNamespace() != "" {
				args = append(args, "-n", o.GetNamespace())
			}
			out, err := e.c.RunKubectl(ctx, nil, args...)
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) == "nephele" {
				left = append(left, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			}
		}
		if pods := e.ccmPods(t); len(pods) > 0 {
			left = append(left, fmt.Sprintf("%d CCM pods", len(pods)))
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
	svcs, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		for _, f := range s.Finalizers {
			if f == "service.kubernetes.io/load-balancer-cleanup" {
				t.Errorf("Service %s/%s still has finalizer %s", s.Namespace, s.Name, f)
			}
		}
	}
	lbs, err := e.c.Cloud.ListLoadBalancers(ctx, e.opts.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) > 0 {
		t.Errorf("the cloud still has %d load balancers: %+v", len(lbs), lbs)
	}
}
