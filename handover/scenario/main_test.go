package scenario

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controllers/loadbalancer"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/witness"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

var (
	seed  = flag.Uint64("scenario.seed", 14, "seed of the kill points and intervals of the scenario loops")
	runs  = flag.Int("scenario.runs", 30, "kills of TestCrashAtEveryStep (each: one kill, a restart, convergence)")
	kills = flag.Int("scenario.kills", 10, "leader kills of TestLeaderKillLoop")
)

// shared is the control plane of the scenarios: etcd and kube-apiserver.
var shared = testenv.Shared{}

func TestMain(m *testing.M) {
	proctest.Main(runCCM)
	os.Exit(shared.Main(m))
}

// runCCM is nephele's cloud-controller-manager as cmd/cloud-controller-manager builds
// it: the local provider and the default controllers.
func runCCM() int {
	reg := cloud.NewRegistry()
	if err := local.Register(reg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return manager.Execute(manager.NewCommand("cloud-controller-manager", reg, controllers.Default()))
}

// Lease timings of every replica: short, in upstream's proportions (15s/10s/2s), so that
// takeovers take seconds.
const (
	leaseDuration = 6 * time.Second
	retryPeriod   = time.Second
	// takeoverBound is docs/manager.md's bound, lease duration + 2 × 2.2 × retry period,
	// plus a second for two apiserver round trips on a busy machine.
	takeoverBound = leaseDuration + 4400*time.Millisecond + time.Second
)

// scenario is one test's world: the shared control plane, a namespace of its own, a
// local cloud behind the witness, and the cloud instances with their Nodes.
type scenario struct {
	t       *testing.T
	env     *controlplane.Env
	ns      string
	cluster string
	lease   string
	// class is the load balancer class of the scenario's Services and managers, so
	// that a manager never sees another scenario's Services.
	class string
	w     *witness.Witness
	nodes []string
}

// newScenario sets up a scenario with n instances and their Nodes.
func newScenario(t *testing.T, n int) *scenario {
	t.Helper()
	e := shared.Env(t)
	ctx := t.Context()
	suffix := strings.ToLower(rand.Text()[:5])
	s := &scenario{t: t, env: e, w: witness.New(t),
		ns: "scenario-" + suffix, cluster: "scenario-" + suffix, lease: "ccm-" + suffix,
		class: "scenario.nephele.dev/" + suffix}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", s.ns, err)
	}
	for i := range n {
		name := fmt.Sprintf("%s-node-%d", suffix, i+1)
		inst, err := s.w.Client.CreateInstance(ctx, api.InstanceSpec{Name: name})
		if err != nil {
			t.Fatalf("creating instance %s: %v", name, err)
		}
		_, err = e.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarioLabel: suffix}},
			Spec:       corev1.NodeSpec{ProviderID: "local://" + inst.ID},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Node %s: %v", name, err)
		}
		s.nodes = append(s.nodes, name)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		err := e.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + suffix})
		if err != nil {
			t.Errorf("deleting the scenario's Nodes: %v", err)
		}
		// Whatever a failed scenario left: no Service stays stuck on the finalizer.
		list, err := e.Client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing Services: %v", err)
			return
		}
		for _, svc := range list.Items {
			if len(svc.Finalizers) > 0 {
				_, _ = e.Client.CoreV1().Services(s.ns).Patch(ctx, svc.Name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
		if err := e.Client.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", s.ns, err)
		}
	})
	return s
}

// scenarioLabel marks the Nodes of one scenario.
const scenarioLabel = "scenario.nephele.dev/run"

// ccmArgs returns the flags of replica name: the local provider through its proxy of
// the witness, leader election on the scenario's lease with the short timings, and
// extra.
func (s *scenario) ccmArgs(name string, extra ...string) []string {
	return append([]string{
		"--cloud-provider=local", "--cloud-config=" + s.w.CloudConfig(s.t, name),
		"--kubeconfig=" + s.env.Kubeconfig, "--secure-port=0", "--v=2",
		"--configure-cloud-routes=false", "--cluster-name=" + s.cluster,
		"--leader-elect-resource-name=" + s.lease, "--load-balancer-class=" + s.class,
		"--leader-elect-lease-duration=" + leaseDuration.String(), "--leader-elect-renew-deadline=4s",
		"--leader-elect-retry-period=" + retryPeriod.String(),
	}, extra...)
}

// identityRE finds the lease identity a replica logs while it waits for the lease.
var identityRE = regexp.MustCompile(`msg="Waiting for lease".* identity="?([^"\s]+)`)

// identity waits until p has logged its lease identity and returns it.
func identity(t *testing.T, p *proctest.Process) string {
	t.Helper()
	deadline := time.Now().Add(proctest.Timeout)
	for time.Now().Before(deadline) {
		if m := identityRE.FindStringSubmatch(p.Output()); m != nil {
			return m[1]
		}
		select {
		case <-p.Done():
			t.Fatalf("the replica exited before it campaigned: %v\n%s", p.Err(), p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("the replica logged no lease identity within %s:\n%s", proctest.Timeout, p.Output())
	return ""
}

// service returns a LoadBalancer Service of the scenario's namespace.
func (s *scenario) service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: &s.class,
			Ports:             []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
}

// converged returns nil once the cloud and the apiserver agree: every LoadBalancer
// Service of the namespace has the finalizer, its load balancer with the eligible nodes
// as backends, and the load balancer's VIP in its status; no Service is stuck being
// deleted; and the cloud has no load balancer of the scenario's cluster without a
// Service. It names what is off otherwise.
func (s *scenario) converged(ctx context.Context) error {
	svcs, err := s.env.Client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	lbs, err := s.w.Client.ListLoadBalancers(ctx, s.cluster)
	if err != nil {
		return err
	}
	byName := map[string]api.LoadBalancer{}
	for _, lb := range lbs {
		byName[lb.Name] = lb
	}
	want, err := s.eligibleNodes(ctx)
	if err != nil {
		return err
	}
	var problems []string
	owned := map[string]bool{}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if svc.DeletionTimestamp != nil {
			problems = append(problems, fmt.Sprintf("Service %s is being deleted since %s", svc.Name, svc.DeletionTimestamp.Time.Format(time.TimeOnly)))
			continue
		}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		name := loadbalancer.LoadBalancerName(svc)
		owned[name] = true
		lb, ok := byName[name]
		switch {
		case !slices.Contains(svc.Finalizers, loadbalancer.Finalizer):
			problems = append(problems, fmt.Sprintf("Service %s has no finalizer", svc.Name))
		case !ok:
			problems = append(problems, fmt.Sprintf("Service %s has no load balancer", svc.Name))
		case len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != lb.Status.VIP:
			problems = append(problems, fmt.Sprintf("Service %s has ingress %+v, its load balancer VIP %s", svc.Name, svc.Status.LoadBalancer.Ingress, lb.Status.VIP))
		default:
			var got []string
			for _, b := range lb.Spec.Backends {
				got = append(got, b.NodeName)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("load balancer of Service %s has backends %v, want %v", svc.Name, got, want))
			}
		}
	}
	for name := range byName {
		if !owned[name] {
			problems = append(problems, "load balancer "+name+" has no Service")
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// eligibleNodes returns the sorted names of the scenario's Nodes that may be backends.
func (s *scenario) eligibleNodes(ctx context.Context) ([]string, error) {
	var out []string
	for _, name := range s.nodes {
		n, err := s.env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if loadbalancer.IsBackend(n) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// leaked counts the load balancers of the scenario's cluster without a Service and the
// Services stuck with a deletion timestamp.
func (s *scenario) leaked(ctx context.Context) (lbs, stuck int, err error) {
	svcs, err := s.env.Client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	owned := map[string]bool{}
	for i := range svcs.Items {
		if svcs.Items[i].DeletionTimestamp != nil {
			stuck++
		}
		owned[loadbalancer.LoadBalancerName(&svcs.Items[i])] = true
	}
	list, err := s.w.Client.ListLoadBalancers(ctx, s.cluster)
	if err != nil {
		return 0, 0, err
	}
	for _, lb := range list {
		if !owned[lb.Name] {
			lbs++
		}
	}
	return lbs, stuck, nil
}

// leaseRecord reads the scenario's lease: its holder and when it was acquired.
func leaseRecord(ctx context.Context, client kubernetes.Interface, name string) (holder string, acquired time.Time, err error) {
	l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, err
	}
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	return holder, acquired, nil
}
