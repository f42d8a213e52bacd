package handover_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/handover"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// shared is the control plane of this package's tests: etcd and kube-apiserver only, so
// that nothing but the test writes Nodes, Leases or workloads. The tests build each
// situation in kube-system and remove it when they end; they run one at a time.
var shared = testenv.Shared{
	// Without kube-controller-manager nobody creates kube-system's default service
	// account, which the apiserver wants for the static pods the tests create.
	Setup: func(ctx context.Context, env *controlplane.Env) error {
		_, err := env.Client.CoreV1().ServiceAccounts(handover.DefaultNamespace).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		return err
	},
}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// now is the time every test surveys at; the leases' renewals are set from it, so that
// the outputs are the same on every run.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const ns = handover.DefaultNamespace

// cluster builds a situation in the shared control plane and removes it when the test
// ends.
type cluster struct {
	t      *testing.T
	client kubernetes.Interface
	config *rest.Config
	// now is when the cluster is surveyed; leases are renewed relative to it.
	now time.Time
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	env := shared.Env(t)
	return &cluster{t: t, client: env.Client, config: env.Config, now: now}
}

func (c *cluster) ctx() context.Context { return context.Background() }

func (c *cluster) check(err error, what string) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// node creates a Node; uninitialized ones carry the uninitialized taint.
func (c *cluster) node(name, providerID string, uninitialized bool) {
	c.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if uninitialized {
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	_, err := c.client.CoreV1().Nodes().Create(c.ctx(), n, metav1.CreateOptions{})
	c.check(err, "creating node "+name)
	c.t.Cleanup(func() { _ = c.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// lease creates a Lease held by holder (empty: released), renewed ago before c.now.
func (c *cluster) lease(name, holder string, ago time.Duration) {
	c.t.Helper()
	renew := metav1.NewMicroTime(c.now.Add(-ago))
	d := int32(15)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &d, RenewTime: &renew, AcquireTime: &renew}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	_, err := c.client.CoordinationV1().Leases(ns).Create(c.ctx(), l, metav1.CreateOptions{})
	c.check(err, "creating lease "+name)
	c.t.Cleanup(func() {
		_ = c.client.CoordinationV1().Leases(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// staticPod creates a Pod as the kubelet mirrors a static pod: owned by its Node.
func (c *cluster) staticPod(name, nodeName, component, image string, command ...string) {
	c.t.Helper()
	node, err := c.client.CoreV1().Nodes().Get(c.ctx(), nodeName, metav1.GetOptions{})
	c.check(err, "reading node "+nodeName)
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"component": component, "tier": "control-plane"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID, Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: component, Image: image, Command: command}}},
	}
	_, err = c.client.CoreV1().Pods(ns).Create(c.ctx(), p, metav1.CreateOptions{})
	c.check(err, "creating pod "+name)
	c.t.Cleanup(func() {
		zero := int64(0)
		_ = c.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

// deployment creates a Deployment (nothing runs its pods here).
func (c *cluster) deployment(name string, labels map[string]string, image string, command []string, args ...string) {
	c.t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image, Command: command, Args: args}}},
			},
		},
	}
	_, err := c.client.AppsV1().Deployments(ns).Create(c.ctx(), d, metav1.CreateOptions{})
	c.check(err, "creating deployment "+name)
	c.t.Cleanup(func() {
		_ = c.client.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// service creates a Service of type LoadBalancer in default, with the cleanup finalizer
// and an ingress address when given, of class (empty: the default class).
func (c *cluster) service(name, class string, finalizer bool, ingress string) {
	c.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if class != "" {
		svc.Spec.LoadBalancerClass = &class
	}
	if finalizer {
		svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	}
	created, err := c.client.CoreV1().Services("default").Create(c.ctx(), svc, metav1.CreateOptions{})
	c.check(err, "creating service "+name)
	c.t.Cleanup(func() {
		ctx := context.Background()
		if s, err := c.client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{}); err == nil && len(s.Finalizers) > 0 {
			s.Finalizers = nil
			_, _ = c.client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{})
		}
		_ = c.client.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
	})
	if ingress != "" {
		created.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
		_, err := c.client.CoreV1().Services("default").UpdateStatus(c.ctx(), created, metav1.UpdateOptions{})
		c.check(err, "setting the address of service "+name)
	}
}

// deleteService starts deleting a Service; its finalizer keeps it.
func (c *cluster) deleteService(name string) {
	c.t.Helper()
	c.check(c.client.CoreV1().Services("default").Delete(c.ctx(), name, metav1.DeleteOptions{}), "deleting service "+name)
}

// survey surveys the cluster at at, through a client that records every request's
// method; it fails the test if any request would change something.
func (c *cluster) surveyAt(at time.Time) *handover.Snapshot {
	c.t.Helper()
	rec := &methods{}
	cfg := rest.CopyConfig(c.config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return rec.wrap(rt) })
	client, err := kubernetes.NewForConfig(cfg)
	c.check(err, "building the client")
	s, err := handover.Survey(c.ctx(), client, ns, at)
	c.check(err, "surveying")
	rec.onlyReads(c.t)
	return s
}

func (c *cluster) survey() *handover.Snapshot { return c.surveyAt(c.now) }

// renew sets a lease's holder and renewal, ago before c.now.
func (c *cluster) renew(name, holder string, ago time.Duration) {
	c.t.Helper()
	l, err := c.client.CoordinationV1().Leases(ns).Get(c.ctx(), name, metav1.GetOptions{})
	c.check(err, "reading lease "+name)
	renew := metav1.NewMicroTime(c.now.Add(-ago))
	l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &renew
	_, err = c.client.CoordinationV1().Leases(ns).Update(c.ctx(), l, metav1.UpdateOptions{})
	c.check(err, "renewing lease "+name)
}

func (c *cluster) deleteLease(name string) {
	c.t.Helper()
	c.check(c.client.CoordinationV1().Leases(ns).Delete(c.ctx(), name, metav1.DeleteOptions{}), "deleting lease "+name)
}

// methods records the requests a client makes.
type methods struct {
	mu   sync.Mutex
	seen []string
}

func (m *methods) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		m.mu.Lock()
		m.seen = append(m.seen, r.Method+" "+r.URL.Path)
		m.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (m *methods) onlyReads(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) == 0 {
		t.Fatal("the survey made no request")
	}
	for _, s := range m.seen {
		if !strings.HasPrefix(s, "GET ") {
			t.Errorf("the survey made a request that is not a read: %s", s)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update to rewrite it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// kubeadmControlPlane is a control-plane node with kube-apiserver and
// kube-controller-manager static pods, their cloud flags given.
func (c *cluster) kubeadmControlPlane(version string, apiserverFlags, kcmFlags []string) {
	c.t.Helper()
	c.staticPod("kube-apiserver-cp1", "cp1", "kube-apiserver", "registry.k8s.io/kube-apiserver:"+version,
		append([]string{"kube-apiserver", "--advertise-address=10.0.0.10", "--secure-port=6443"}, apiserverFlags...)...)
	c.staticPod("kube-controller-manager-cp1", "cp1", "kube-controller-manager", "registry.k8s.io/kube-controller-manager:"+version,
		append([]string{"kube-controller-manager", "--leader-elect=true", "--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"}, kcmFlags...)...)
}

var specs = controllers.Default()

// plan makes the runbook of move for s and returns its text.
func plan(t *testing.T, s *handover.Snapshot, move handover.Move, target handover.Target, why string) []byte {
	t.Helper()
	target.Specs = specs
	rb, err := handover.NewRunbook(s, move, target)
	if err != nil {
		t.Fatal(err)
	}
	rb.Why = why
	var out bytes.Buffer
	if err := rb.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestPlanFromKubeControllerManager(t *testing.T) {
	c := newCluster(t)
	c.node("cp1", "gce://proj/europe-west1-b/cp1", false)
	c.node("worker-a", "gce://proj/europe-west1-b/worker-a", false)
	c.node("worker-b", "", false)
	c.kubeadmControlPlane("v1.30.2", []string{"--cloud-provider=gce", "--cloud-config=/etc/kubernetes/gce.conf"},
		[]string{"--cloud-provider=gce", "--cloud-config=/etc/kubernetes/gce.conf", "--cluster-name=prod", "--configure-cloud-routes=true"})
	c.lease("kube-controller-manager", "cp1_5b2c0e1a", 2*time.Second)
	c.lease("kube-scheduler", "cp1_0f9d4410", time.Second)
	c.service("web", "", true, "203.0.113.10")
	c.service("api", "", true, "203.0.113.11")

	s := c.survey()
	from, why, err := handover.DetectSource(s, "")
	if err != nil || from != handover.FromKubeControllerManager {
		t.Fatalf("DetectSource = %q, %q, %v; want kube-controller-manager", from, why, err)
	}
	golden(t, "plan-kube-controller-manager.txt", plan(t, s, handover.Move{From: from}, handover.Target{Provider: "gce"}, why))

}

func TestPlanRollbackToKubeControllerManager(t *testing.T) {
	// The cluster after the move: kube-controller-manager external, nephele deployed
	// and leading without leader migration.
	c := newCluster(t)
	c.node("cp1", "gce://proj/europe-west1-b/cp1", false)
	c.node("worker-a", "gce://proj/europe-west1-b/worker-a", false)
	c.kubeadmControlPlane("v1.30.2", nil, []string{"--cloud-provider=external", "--cluster-name=prod"})
	c.deployment("nephele-ccm", map[string]string{"app.kubernetes.io/name": "nephele-ccm", "app.kubernetes.io/part-of": "nephele"},
		"registry.example.com/nephele/cloud-controller-manager:v0.4.0", []string{"/cloud-controller-manager"},
		"--cloud-provider=gce", "--cluster-name=prod", "--leader-elect=true")
	c.lease("kube-controller-manager", "cp1_1d2e3f40", 2*time.Second)
	c.lease("cloud-controller-manager", "cp1_9e8d7c6b", time.Second)
	c.service("web", "", true, "203.0.113.10")

	s := c.survey()
	if _, _, err := handover.DetectSource(s, ""); !errors.Is(err, handover.ErrNothingToMove) {
		t.Fatalf("DetectSource after the move = %v, want ErrNothingToMove", err)
	}
	golden(t, "plan-kube-controller-manager-rollback.txt", plan(t, s, handover.Move{From: handover.FromKubeControllerManager, Rollback: true},
		handover.Target{Provider: "gce", InTreeProvider: "gce"}, ""))
}

func TestPlanFromKubeControllerManagerBeforeV128(t *testing.T) {
	c := newCluster(t)
	c.node("cp1", "aws:///eu-west-1a/i-0abc", false)
	c.kubeadmControlPlane("v1.23.17", nil, []string{"--cloud-provider=aws", "--controllers=*,-route"})
	c.lease("kube-controller-manager", "cp1_77", 2*time.Second)

	rb, err := handover.NewRunbook(c.survey(), handover.Move{From: handover.FromKubeControllerManager}, handover.Target{Provider: "local", Specs: specs})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Findings) == 0 || !rb.Findings[0].Blocking || rb.Findings[0].Object != "node/cp1" {
		t.Errorf("findings %+v, want first a blocking one: node/cp1's provider ID is not local's", rb.Findings)
	}
	var kcmFile, nephFile string
	for _, s := range rb.Steps {
		for _, f := range s.Files {
			switch filepath.Base(f.Path) {
			case "leader-migration-kube-controller-manager.yaml":
				kcmFile = f.Content
			case "leader-migration-nephele.yaml":
				nephFile = f.Content
			}
		}
	}
	// Before v1.24 only v1beta1 is read; before v1.28 the controllers had short names; a
	// controller it does not run (-route) does not move.
	for _, want := range []string{"/v1beta1\n", "resourceLock: leases", "name: service\n", "name: cloud-node-lifecycle\n", "component: kube-controller-manager"} {
		if !strings.Contains(kcmFile, want) {
			t.Errorf("kube-controller-manager's file lacks %q:\n%s", want, kcmFile)
		}
	}
	for _, want := range []string{"/v1\n", "name: service-lb-controller\n", "name: cloud-node-lifecycle-controller\n", "component: cloud-controller-manager"} {
		if !strings.Contains(nephFile, want) {
			t.Errorf("nephele's file lacks %q:\n%s", want, nephFile)
		}
	}
	if strings.Contains(kcmFile+nephFile, "route") {
		t.Errorf("a controller kube-controller-manager does not run is migrated:\n%s\n%s", kcmFile, nephFile)
	}
}

func TestPlanFromCloudControllerManager(t *testing.T) {
	c := newCluster(t)
	c.node("cp1", "local://i-0001", false)
	c.node("worker-a", "local://i-0002", false)
	c.node("worker-b", "local://i-0003", false)
	c.kubeadmControlPlane("v1.36.3", nil, []string{"--cloud-provider=external"})
	c.deployment("cloud-controller-manager", map[string]string{"k8s-app": "cloud-controller-manager"},
		"registry.example.com/upstream-local-ccm:v1.36.3", []string{"/cloud-controller-manager"},
		"--cloud-provider=local", "--cloud-config=/etc/local/cloud.yaml", "--leader-elect=true", "--cluster-name=nephele",
		"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--leader-elect-lease-duration=15s", "--leader-elect-retry-period=2s")
	c.lease("kube-controller-manager", "cp1_5b2c0e1a", 2*time.Second)
	c.lease("cloud-controller-manager", "cp1_c4a3b2f1", time.Second)
	c.service("web", "", true, "127.100.0.1")

	s := c.survey()
	from, why, err := handover.DetectSource(s, "")
	if err != nil || from != handover.FromCloudControllerManager {
		t.Fatalf("DetectSource = %q, %q, %v; want cloud-controller-manager", from, why, err)
	}
	golden(t, "plan-cloud-controller-manager.txt", plan(t, s, handover.Move{From: from}, handover.Target{Provider: "local"}, why))
	golden(t, "plan-cloud-controller-manager-rollback.txt", plan(t, s, handover.Move{From: from, Rollback: true}, handover.Target{Provider: "local"}, ""))
}

func TestPlanSeesOnlyWhatItMayRead(t *testing.T) {
	c := newCluster(t)
	c.node("cp1", "local://i-0001", false)
	c.lease("cloud-controller-manager", "cp1_c4a3b2f1", time.Second)
	c.deployment("cloud-controller-manager", map[string]string{"k8s-app": "cloud-controller-manager"},
		"registry.example.com/upstream-local-ccm:v1.36.3", nil, "--cloud-provider=local")
	// A reader allowed Nodes, Services and Leases, not workloads.
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "handover-limited"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "services"}, Verbs: []string{"list"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list"}},
	}}
	_, err := c.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	c.check(err, "creating the role")
	t.Cleanup(func() {
		_ = c.client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "handover-limited"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "handover-limited"}}}
	_, err = c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	c.check(err, "creating the binding")
	t.Cleanup(func() {
		_ = c.client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "handover-limited"}
	limited, err := kubernetes.NewForConfig(cfg)
	c.check(err, "building the client")

	var s *handover.Snapshot
	deadline := time.Now().Add(30 * time.Second) // RBAC reaches the authorizer's cache
	for {
		s, err = handover.Survey(ctx, limited, ns, now)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.check(err, "surveying with limited rights")
	if len(s.Components) != 0 || len(s.Hidden) != 3 {
		t.Fatalf("components %v, hidden %v; want none seen and Deployments, DaemonSets and Pods hidden", s.Components, s.Hidden)
	}
	// The lease alone does not tell nephele's from another cloud-controller-manager's.
	if from, _, err := handover.DetectSource(s, ""); err == nil || !strings.Contains(err.Error(), "lease kube-system/cloud-controller-manager is held, by nephele or by another") {
		t.Fatalf("DetectSource = %q, %v; want an error naming the ambiguous lease", from, err)
	}
	// Unless nephele leads on a lease of its own.
	from, why, err := handover.DetectSource(s, handover.SeparateLease)
	if err != nil || from != handover.FromCloudControllerManager || !strings.Contains(why, "lease kube-system/cloud-controller-manager is held") {
		t.Fatalf("DetectSource = %q, %q, %v; want cloud-controller-manager from its lease", from, why, err)
	}
	out := string(plan(t, s, handover.Move{From: from}, handover.Target{}, why))
	for _, want := range []string{"not readable: Deployments in kube-system (Forbidden)", "cloud-controller-manager (every instance; none is visible in the API)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the runbook does not say %q:\n%s", want, out)
		}
	}
}

func TestDetectSource(t *testing.T) {
	held := handover.Lease{Namespace: ns, Name: "cloud-controller-manager", Holder: "a", RenewTime: now, Duration: 15 * time.Second}
	external := handover.Component{Kind: handover.KubeControllerManager, Workload: "static Pod kube-system/kcm", Args: handover.Args{{Name: "cloud-provider", Value: "external"}}}
	nephele := handover.Component{Kind: handover.CloudControllerManager, Nephele: true, Workload: "Deployment kube-system/nephele-ccm"}
	tests := []struct {
		name    string
		s       handover.Snapshot
		lease   string
		want    handover.Source
		wantErr string
	}{
		{"nothing visible", handover.Snapshot{Namespace: ns, Time: now, Hidden: []string{"Pods in kube-system (Forbidden)"}}, "", "",
			"cannot tell what runs the cloud controllers: no kube-controller-manager or cloud-controller-manager is visible in kube-system (not readable: Pods in kube-system (Forbidden)): give --from"},
		{"external kube-controller-manager alone", handover.Snapshot{Namespace: ns, Time: now, Components: []handover.Component{external}}, "", "", "nothing to move"},
		{"already nephele", handover.Snapshot{Namespace: ns, Time: now, Components: []handover.Component{external, nephele}}, "", "", "the only cloud-controller-manager is nephele's"},
		{"a held lease that is not nephele's", handover.Snapshot{Namespace: ns, Time: now, Leases: []handover.Lease{held}}, handover.SeparateLease, handover.FromCloudControllerManager, ""},
		{"nephele's own lease", handover.Snapshot{Namespace: ns, Time: now, Leases: []handover.Lease{held}}, "", "", "is held, by nephele or by another cloud-controller-manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := handover.DetectSource(&tt.s, tt.lease)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DetectSource = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DetectSource = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	c := newCluster(t)
	c.node("cp1", "gce://proj/europe-west1-b/cp1", false)
	c.lease("kube-controller-manager", "cp1_5b2c0e1a", 2*time.Second)
	c.lease("cloud-provider-extraction-migration", "cp1_5b2c0e1a", 3*time.Second)
	c.lease("cloud-controller-manager", "cp1_9e8d7c6b", time.Second)
	c.lease("kube-scheduler", "cp1_0f9d4410", 40*time.Second) // stale
	t.Cleanup(func() {
		_ = c.client.CoordinationV1().Leases(ns).Delete(context.Background(), "kube-scheduler", metav1.DeleteOptions{})
	})
	migrated, err := handover.MigratedControllers(nil, specs)
	c.check(err, "reading the default migration config")

	var out bytes.Buffer
	c.check(handover.NewStatus(c.survey(), handover.Leases{}, specs, migrated).WriteText(&out), "writing the status")
	golden(t, "status-kube-controller-manager-holds-migration.txt", out.Bytes())

	// Later: kube-controller-manager runs with --cloud-provider=external (restarted, so
	// under a new identity) and nephele holds the migration lease.
	out.Reset()
	c.now = now.Add(30 * time.Second)
	c.renew("cloud-controller-manager", "cp1_9e8d7c6b", time.Second)
	c.renew("cloud-provider-extraction-migration", "cp1_9e8d7c6b", time.Second)
	c.renew("kube-controller-manager", "cp1_1d2e3f40", 2*time.Second)
	c.deleteLease("kube-scheduler")
	c.check(handover.NewStatus(c.survey(), handover.Leases{}, specs, migrated).WriteText(&out), "writing the status")
	golden(t, "status-nephele-holds-migration.txt", out.Bytes())
}
