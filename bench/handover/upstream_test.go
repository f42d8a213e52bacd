package handover

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/ccm/nephele"
	"github.com/nephele-dev/nephele/bench/ccm/upstream"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/handover"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/internal/testkit/witness"
	"github.com/nephele-dev/nephele/localcloud/api"
)

func TestMain(m *testing.M) {
	// The child process: `upstream <flags>` runs upstream's cloud-controller-manager,
	// `nephele <flags>` nephele's, each with the local cloud's provider.
	proctest.Main(func() int {
		return ccm.Child(os.Args[1:], os.Stderr, map[ccm.Impl]ccm.Func{ccm.Upstream: upstream.Run, ccm.Nephele: nephele.Run})
	})
	os.Exit(m.Run())
}

// Lease timings of both managers: upstream's proportions (15s/10s/2s), shortened.
var timing = []string{"--leader-elect=true", "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

// takeoverBound is docs/manager.md's bound for a lease its holder does not release:
// lease duration + 2 × 2.2 × retry period, plus a second of apiserver round trips.
const takeoverBound = 6*time.Second + 4400*time.Millisecond + time.Second

const (
	clusterName    = "handover"
	upstreamLease  = "cloud-controller-manager"
	migrationLease = "cloud-provider-extraction-migration"
)

// nodeView is what the move may not change on a Node.
type nodeView struct {
	ResourceVersion string
	ProviderID      string
	Labels          map[string]string
	Annotations     map[string]string
	Taints          []corev1.Taint
	Addresses       []corev1.NodeAddress
}

// TestFromUpstreamCCM runs upstream's cloud-controller-manager on a cluster with
// uninitialized Nodes and LoadBalancer Services until it has initialized and served
// them, then follows the runbook `nephele migrate plan` prints for the move to nephele:
// upstream with leader migration, nephele beside it, upstream stopped. The local cloud's
// witness and the apiserver say what the move did: no load balancer created, deleted or
// re-created, no Node written, and the gap between upstream's last and nephele's first
// term on the migration lease.
func TestFromUpstreamCCM(t *testing.T) {
	start := time.Now()
	env := testenv.New(t, controlplane.Options{})
	ctx := t.Context()
	w := witness.New(t)
	nodes := env.Client.CoreV1().Nodes()
	var names []string
	for i := range 3 {
		name := "node-" + strconv.Itoa(i+1)
		inst, err := w.Client.CreateInstance(ctx, api.InstanceSpec{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		// As a kubelet with --cloud-provider=external and --provider-id registers it.
		_, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.NodeSpec{ProviderID: "local://" + inst.ID, Taints: []corev1.Taint{{
				Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	services := env.Client.CoreV1().Services("default")
	for i := range 3 {
		_, err := services.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-" + strconv.Itoa(i)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	startUpstream := func(name string, extra ...string) *proctest.Process {
		port := testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1"))
		args := append([]string{"upstream",
			"--cloud-provider=local", "--cloud-config=" + w.CloudConfig(t, name),
			"--kubeconfig=" + env.Kubeconfig, "--authentication-kubeconfig=" + env.Kubeconfig, "--authorization-kubeconfig=" + env.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(int(port)), "--cert-dir=" + t.TempDir(),
			"--cluster-name=" + clusterName, "--configure-cloud-routes=false", "--v=2"}, timing...)
		return proctest.Start(t, "upstream cloud-controller-manager "+name, append(args, extra...)...)
	}

	// Before: upstream's cloud-controller-manager runs the cloud controllers.
	u1 := startUpstream("upstream-1")
	poll.WithinContext(t, 2*time.Minute, "upstream to initialize the Nodes and serve the Services", func(ctx context.Context) error {
		return served(ctx, env, w, names)
	})
	before := nodeViews(t, env, names)
	lbsBefore := loadBalancers(t, w)

	// The runbook, from the cluster as it is.
	snap, err := handover.Survey(ctx, env.Client, handover.DefaultNamespace, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := handover.NewRunbook(snap, handover.Move{From: handover.FromCloudControllerManager},
		handover.Target{Provider: "local", Specs: controllers.Default()})
	if err != nil {
		t.Fatal(err)
	}
	files, err := rb.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	upstreamFile, nepheleFile := files["leader-migration-cloud-controller-manager.yaml"], files["leader-migration-nephele.yaml"]
	if upstreamFile == "" || nepheleFile == "" {
		t.Fatalf("the runbook has files %v, want the old cloud-controller-manager's and nephele's", files)
	}

	// Step 1: upstream with leader migration (a rollout: the new replica leads once the
	// old one's lease has expired).
	terminate(t, u1)
	u2 := startUpstream("upstream-2", "--enable-leader-migration", "--leader-migration-config="+upstreamFile)
	poll.WithinContext(t, 2*time.Minute, "upstream to hold the migration lease", func(ctx context.Context) error {
		return sameHolder(ctx, env, migrationLease, upstreamLease)
	})

	// Step 2: nephele beside it, on its own main lease, waiting for the migration lease.
	n := proctest.Start(t, "nephele cloud-controller-manager", append([]string{"nephele",
		"--cloud-provider=local", "--cloud-config=" + w.CloudConfig(t, "nephele"), "--kubeconfig=" + env.Kubeconfig,
		"--secure-port=0", "--v=2", "--cluster-name=" + clusterName, "--configure-cloud-routes=false",
		"--leader-elect-resource-name=" + handover.SeparateLease,
		"--enable-leader-migration", "--leader-migration-config=" + nepheleFile}, timing...)...)
	poll.WithinContext(t, 2*time.Minute, "nephele to hold its main lease", func(ctx context.Context) error {
		h, _, err := leaseRecord(ctx, env, handover.SeparateLease)
		if err != nil || h == "" {
			return fmt.Errorf("lease %s not held (%v)", handover.SeparateLease, err)
		}
		return nil
	})
	nepheleWaiting := time.Now()
	// Wait for nephele to campaign for the migration lease for a few retry periods: it
	// must not take it while upstream holds it.
	poll.Within(t, proctest.Timeout, "nephele to wait for the migration lease", func() error {
		if d := time.Since(nepheleWaiting); d < 3*time.Second {
			return fmt.Errorf("nephele has waited %s", d)
		}
		return nil
	})
	if err := sameHolder(ctx, env, migrationLease, upstreamLease); err != nil {
		t.Fatalf("with nephele beside it, upstream no longer holds the migration lease: %v", err)
	}

	// Step 3: upstream stops; nephele takes the migration lease over once it expires.
	stopped := time.Now()
	terminate(t, u2)
	var acquired time.Time
	poll.WithinContext(t, 2*time.Minute, "nephele to hold the migration lease", func(ctx context.Context) error {
		if err := sameHolder(ctx, env, migrationLease, handover.SeparateLease); err != nil {
			return err
		}
		_, acquired, err = leaseRecord(ctx, env, migrationLease)
		return err
	})
	poll.WithinContext(t, 2*time.Minute, "nephele to serve the Services", func(ctx context.Context) error {
		return served(ctx, env, w, names)
	})
	// nephele ensures each load balancer once as it starts; let it finish.
	poll.Within(t, 2*time.Minute, "nephele to ensure every load balancer once", func() error {
		seen := map[string]bool{}
		for _, c := range w.Log() {
			if c.Replica == "nephele" && c.Op == witness.OpEnsure && c.Status/100 == 2 {
				seen[c.LB] = true
			}
		}
		if len(seen) < len(lbsBefore) {
			return fmt.Errorf("%d of %d load balancers ensured", len(seen), len(lbsBefore))
		}
		return nil
	})
	after := nodeViews(t, env, names)
	lbsAfter := loadBalancers(t, w)

	// The verdict.
	var lastUpstream, firstNephele time.Time
	nepheleEarly, nepheleOps := map[string]int{}, map[string]int{}
	var deletes, upstreamLate int
	for _, c := range w.Log() {
		if c.Op == witness.OpDelete {
			deletes++
		}
		switch {
		case strings.HasPrefix(c.Replica, "upstream"):
			if c.Arrived.After(lastUpstream) {
				lastUpstream = c.Arrived
			}
			if c.Arrived.After(acquired) {
				upstreamLate++
			}
		case c.Replica == "nephele":
			if c.Arrived.Before(acquired) {
				nepheleEarly[c.Op]++
				continue
			}
			nepheleOps[c.Op]++
			if firstNephele.IsZero() {
				firstNephele = c.Arrived
			}
		}
	}
	if upstreamLate != 0 {
		t.Errorf("upstream made %d cloud calls after nephele acquired the migration lease", upstreamLate)
	}
	if len(nepheleEarly) != 0 {
		t.Errorf("nephele called the cloud before it held the migration lease: %v", nepheleEarly)
	}
	if deletes != 0 {
		t.Errorf("%d load balancer deletes", deletes)
	}
	if !reflect.DeepEqual(lbsBefore, lbsAfter) {
		t.Errorf("load balancers (name: creation time) before the move %v, after %v", lbsBefore, lbsAfter)
	}
	var touched []string
	for _, name := range names {
		if !reflect.DeepEqual(before[name], after[name]) {
			touched = append(touched, fmt.Sprintf("%s: %+v -> %+v", name, before[name], after[name]))
		}
	}
	if len(touched) > 0 {
		t.Errorf("Nodes changed by the move: %s", strings.Join(touched, "; "))
	}
	gap := acquired.Sub(stopped)
	if gap > takeoverBound {
		t.Errorf("nephele took the migration lease %s after upstream stopped, above the bound %s", gap, takeoverBound)
	}
	t.Logf("upstream -> nephele: nephele acquired the migration lease %s after upstream got SIGTERM (bound %s); upstream's last cloud call %s before it, nephele's first %s after it; %d load balancers kept (0 created, %d deleted), %d Nodes of %d written; calls at the cloud before nephele led: upstream only (nephele %v); nephele's calls once leading %v; test took %s",
		gap.Round(10*time.Millisecond), takeoverBound, acquired.Sub(lastUpstream).Round(10*time.Millisecond),
		firstNephele.Sub(acquired).Round(10*time.Millisecond), len(lbsAfter), deletes, len(touched), len(names), nepheleEarly,
		nepheleOps, time.Since(start).Round(time.Second))
	select {
	case <-n.Done():
		t.Errorf("nephele exited during the move (%v)", n.Err())
	default:
	}
}

// terminate stops p as its Deployment would on a scale down: SIGTERM, then wait. Upstream's
// manager exits non-zero when its leader election stops, so any exit code goes.
func terminate(t *testing.T, p *proctest.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	p.Wait(t, proctest.Timeout)
}

// served returns nil once every Node is initialized (provider ID, no uninitialized
// taint, an address) and every Service has an address that is its load balancer's VIP.
func served(ctx context.Context, env *controlplane.Env, w *witness.Witness, names []string) error {
	for _, name := range names {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
			return fmt.Errorf("node %s is not initialized", name)
		}
		if len(n.Status.Addresses) == 0 {
			return fmt.Errorf("node %s has no address", name)
		}
	}
	svcs, err := env.Client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	lbs, err := w.Client.ListLoadBalancers(ctx, clusterName)
	if err != nil {
		return err
	}
	vips := map[string]bool{}
	for _, lb := range lbs {
		vips[lb.Status.VIP] = true
	}
	for _, svc := range svcs.Items {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		ing := svc.Status.LoadBalancer.Ingress
		if len(ing) != 1 || !vips[ing[0].IP] {
			return fmt.Errorf("Service %s: ingress %+v, not a load balancer's VIP", svc.Name, ing)
		}
	}
	return nil
}

func nodeViews(t *testing.T, env *controlplane.Env, names []string) map[string]nodeView {
	t.Helper()
	out := map[string]nodeView{}
	for _, name := range names {
		n, err := env.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = nodeView{ResourceVersion: n.ResourceVersion, ProviderID: n.Spec.ProviderID, Labels: n.Labels,
			Annotations: n.Annotations, Taints: n.Spec.Taints, Addresses: n.Status.Addresses}
	}
	return out
}

// loadBalancers returns the cluster's load balancers: name -> creation time.
func loadBalancers(t *testing.T, w *witness.Witness) map[string]time.Time {
	t.Helper()
	lbs, err := w.Client.ListLoadBalancers(t.Context(), clusterName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, lb := range lbs {
		out[lb.Name] = lb.CreatedAt
	}
	return out
}

// sameHolder returns nil once lease a is held by the holder of lease b.
func sameHolder(ctx context.Context, env *controlplane.Env, a, b string) error {
	ha, _, err := leaseRecord(ctx, env, a)
	if err != nil {
		return err
	}
	hb, _, err := leaseRecord(ctx, env, b)
	if err != nil {
		return err
	}
	if ha == "" || ha != hb {
		return fmt.Errorf("lease %s held by %q, lease %s by %q", a, ha, b, hb)
	}
	return nil
}

// leaseRecord reads a lease of kube-system: its holder and when it was acquired.
func leaseRecord(ctx context.Context, env *controlplane.Env, name string) (string, time.Time, error) {
	l, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading lease %s: %w", name, err)
	}
	var holder string
	var acquired time.Time
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	return holder, acquired, nil
}
