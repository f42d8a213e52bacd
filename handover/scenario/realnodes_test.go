package scenario

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/handover"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcluster"
)

// demoPort is where the demo image serves HTTP.
const demoPort = 8080

// TestKubeControllerManagerAndBackOnRealNodes moves the cloud controllers from a
// kube-controller-manager v1.35 to nephele and back on a cluster of real kubelets
// (package localcluster), by the runbook's files: the kubelets register their Nodes
// uninitialized, nephele initializes them beside kube-controller-manager, takes the
// migrated controllers over when kube-controller-manager stops, gives a LoadBalancer
// Service in front of real pods its load balancer, and hands the controllers back.
// Through both moves the Service's VIP is asked every 100ms: it must keep answering,
// the Nodes must stay Ready, and the gaps (from the stop of one side to the other's
// acquiring the migration lease) must stay within the bound.
func TestKubeControllerManagerAndBackOnRealNodes(t *testing.T) {
	hoststest.RequireRoot(t)
	start := time.Now()
	bin := clustertest.BinDir(t)
	// The realistic peer, kube-controller-manager v1.35 (make tools builds it), beside the
	// cluster's own programs.
	shared, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(shared, controlplane.ControllerManagerV135), filepath.Join(bin, controlplane.ControllerManagerV135)); err != nil {
		t.Fatal(err)
	}
	// The runbook's files go where nephele's flags say before they exist: they are
	// written once the cluster can be surveyed.
	files := t.TempDir()
	kcmFile, nephFile := filepath.Join(files, "leader-migration-kube-controller-manager.yaml"), filepath.Join(files, "leader-migration-nephele.yaml")
	timing := []string{"--leader-elect-lease-duration=" + leaseDuration.String(), "--leader-elect-renew-deadline=4s",
		"--leader-elect-retry-period=" + retryPeriod.String()}
	c, _ := clustertest.Start(t, "nphho", bin, 2, func(cfg *localcluster.Config) {
		cfg.DeferCCM = true
		cfg.CCMArgs = append([]string{"--enable-leader-migration", "--leader-migration-config=" + nephFile, "--v=2"}, timing...)
	})
	ctx := t.Context()

	snap, err := handover.Survey(ctx, c.Env.Client, handover.DefaultNamespace, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := handover.NewRunbook(snap, handover.Move{From: handover.FromKubeControllerManager},
		handover.Target{Provider: "local", InTreeProvider: "local", Specs: controllers.Default()})
	if err != nil {
		t.Fatal(err)
	}
	written, err := rb.WriteFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if written[filepath.Base(kcmFile)] != kcmFile || written[filepath.Base(nephFile)] != nephFile {
		t.Fatalf("the runbook wrote %v, want %s and %s", written, kcmFile, nephFile)
	}
	startKCM := func() *controlplane.Process {
		// Only the migrated controllers: localcluster's own kube-controller-manager runs
		// the others, without leader election.
		args := append([]string{"--leader-elect=true", "--enable-leader-migration", "--leader-migration-config=" + kcmFile,
			"--controllers=service-lb-controller,node-route-controller,cloud-node-lifecycle-controller"}, timing...)
		p, err := c.Env.StartControllerManagerBinary(ctx, controlplane.ControllerManagerV135, args...)
		if err != nil {
			t.Fatalf("starting kube-controller-manager v1.35: %v", err)
		}
		return p
	}
	const (
		kcmLease       = handover.KubeControllerManagerLease
		nepheleLease   = "cloud-controller-manager"
		migrationLease = "cloud-provider-extraction-migration"
	)
	holds := func(holderOf string) func(context.Context) error {
		return func(ctx context.Context) error {
			hm, _, err := leaseRecord(ctx, c.Env.Client, migrationLease)
			if err != nil {
				return err
			}
			h, _, err := leaseRecord(ctx, c.Env.Client, holderOf)
			if err != nil {
				return err
			}
			if hm == "" || hm != h {
				return fmt.Errorf("migration lease held by %q, %s by %q", hm, holderOf, h)
			}
			return nil
		}
	}

	// Step 1: kube-controller-manager runs the cloud controllers under the migration lease.
	kcm := startKCM()
	poll.WithinContext(t, 2*time.Minute, "kube-controller-manager to hold the migration lease", holds(kcmLease))

	// Step 2: nephele beside it initializes the Nodes (cloud-node-controller runs under its
	// own lease) and waits for the migration lease.
	if err := c.StartCCM(ctx); err != nil {
		t.Fatal(err)
	}
	if err := holds(kcmLease)(ctx); err != nil {
		t.Fatalf("with nephele beside it: %v", err)
	}
	demoService(t, c)
	var vip string

	// Step 3: kube-controller-manager stops; nephele takes the migration lease over and
	// gives the Service its load balancer.
	firstKCM, _, err := leaseRecord(ctx, c.Env.Client, kcmLease)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := kcm.Stop(); err != nil {
		t.Fatalf("stopping kube-controller-manager: %v", err)
	}
	var toNephele time.Duration
	poll.WithinContext(t, 2*time.Minute, "nephele to hold the migration lease", func(ctx context.Context) error {
		if err := holds(nepheleLease)(ctx); err != nil {
			return err
		}
		_, acquired, err := leaseRecord(ctx, c.Env.Client, migrationLease)
		toNephele = acquired.Sub(stopped)
		return err
	})
	poll.WithinContext(t, 3*time.Minute, "the Service's VIP to answer", func(ctx context.Context) error {
		svc, err := c.Env.Client.CoreV1().Services("default").Get(ctx, "handover-demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("no address yet")
		}
		vip = svc.Status.LoadBalancer.Ingress[0].IP
		return askVIP(ctx, vip)
	})
	// nephele converges before anything else moves: a route for every node's pods (the
	// VIP's traffic crosses nodes through them) and the VIP answering 20 times in a row.
	poll.WithinContext(t, 2*time.Minute, "a route for every node", func(ctx context.Context) error {
		routes, err := c.Cloud.ListRoutes(ctx, c.Config().ClusterName)
		if err != nil {
			return err
		}
		if len(routes) != len(c.Nodes) {
			return fmt.Errorf("%d routes for %d nodes", len(routes), len(c.Nodes))
		}
		return nil
	})
	poll.WithinContext(t, 2*time.Minute, "the VIP to answer 20 times in a row", func(ctx context.Context) error {
		for i := range 20 {
			if err := askVIP(ctx, vip); err != nil {
				return fmt.Errorf("answer %d: %w", i, err)
			}
		}
		return nil
	})
	lbs, err := c.Cloud.ListLoadBalancers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	// Rollback: kube-controller-manager comes back with leader migration and waits;
	// nephele stops (it releases the lease) and kube-controller-manager takes over.
	// The VIP is asked all along.
	probe := newProber(ctx, vip)
	// The control plane stops it when the test ends.
	startKCM()
	poll.WithinContext(t, 2*time.Minute, "kube-controller-manager to lead on its main lease", func(ctx context.Context) error {
		// The stopped one did not release it: the new one leads once it has expired.
		h, _, err := leaseRecord(ctx, c.Env.Client, kcmLease)
		if err != nil || h == "" || h == firstKCM {
			return fmt.Errorf("lease %s held by %q (%v), not yet by the new kube-controller-manager", kcmLease, h, err)
		}
		return nil
	})
	if err := holds(nepheleLease)(ctx); err != nil {
		t.Fatalf("with kube-controller-manager back and waiting: %v", err)
	}
	stopped = time.Now()
	if err := c.CCM.Stop(); err != nil {
		t.Fatalf("stopping nephele: %v", err)
	}
	nepheleExited := time.Since(stopped)
	nepheleLog, err := os.ReadFile(c.CCM.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	released := strings.Count(string(nepheleLog), `msg="Released lease"`)
	var toKCM time.Duration
	poll.WithinContext(t, 2*time.Minute, "kube-controller-manager to hold the migration lease again", func(ctx context.Context) error {
		if err := holds(kcmLease)(ctx); err != nil {
			return err
		}
		_, acquired, err := leaseRecord(ctx, c.Env.Client, migrationLease)
		toKCM = acquired.Sub(stopped)
		return err
	})
	// A few more answers after the rollback, then the verdict.
	probe.waitAnswers(t, 20)
	asked, failed := probe.stop()
	after, err := c.Cloud.ListLoadBalancers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(lbs) || (len(lbs) == 1 && !after[0].CreatedAt.Equal(lbs[0].CreatedAt)) {
		t.Errorf("load balancers %v before the rollback, %v after", lbs, after)
	}
	nodes, err := c.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if !localcluster.IsReady(&n) {
			t.Errorf("node %s is not Ready after the moves", n.Name)
		}
		if ok, why := localcluster.Initialized(&n); !ok {
			t.Errorf("node %s: %s", n.Name, why)
		}
	}
	if failed != 0 {
		t.Errorf("the VIP failed %d of %d requests during the rollback", failed, asked)
	}
	if toNephele > takeoverBound {
		t.Errorf("nephele took the migration lease %s after kube-controller-manager stopped, above %s", toNephele, takeoverBound)
	}
	t.Logf("kube-controller-manager v1.35 -> nephele -> back on %d real nodes: nephele acquired the migration lease %s after kube-controller-manager stopped (bound %s), kube-controller-manager %s after nephele got SIGTERM (nephele exited after %s, releasing %d leases); the VIP answered %d of %d requests during the rollback; %d load balancer kept; test took %s",
		len(nodes.Items), toNephele.Round(10*time.Millisecond), takeoverBound, toKCM.Round(10*time.Millisecond), nepheleExited.Round(10*time.Millisecond), released, asked-failed, asked, len(after),
		time.Since(start).Round(time.Second))
}

// demoService runs two demo pods and a LoadBalancer Service in front of them.
func demoService(t *testing.T, c *localcluster.Cluster) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": "handover-demo"}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "handover-demo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "demo", Image: localcluster.DemoImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Env: []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"),
							field("POD_IP", "status.podIP"), field("NODE_NAME", "spec.nodeName")},
						Ports: []corev1.ContainerPort{{ContainerPort: demoPort}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](5),
				},
			},
		},
	}
	if _, err := c.Env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the demo Deployment: %v", err)
	}
	_, err := c.Env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "handover-demo"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels,
			Ports: []corev1.ServicePort{{Port: demoPort, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the demo Service: %v", err)
	}
}

// askVIP returns nil when the VIP answers 200 on the demo port.
func askVIP(ctx context.Context, vip string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(vip, strconv.Itoa(demoPort))+"/", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET through %s: %s", vip, resp.Status)
	}
	return nil
}

// prober asks the VIP every 100ms until stopped and counts the answers.
type prober struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu            sync.Mutex
	asked, failed int
}

func newProber(ctx context.Context, vip string) *prober {
	ctx, cancel := context.WithCancel(ctx)
	p := &prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := askVIP(ctx, vip)
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.asked++
			if err != nil {
				p.failed++
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// waitAnswers waits until n more requests have been asked.
func (p *prober) waitAnswers(t *testing.T, n int) {
	t.Helper()
	p.mu.Lock()
	target := p.asked + n
	p.mu.Unlock()
	poll.Within(t, time.Minute, "more requests through the VIP", func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.asked < target {
			return fmt.Errorf("%d of %d asked", p.asked, target)
		}
		return nil
	})
}

func (p *prober) stop() (asked, failed int) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked, p.failed
}
