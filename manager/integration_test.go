package manager_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

// heartbeatNamespace holds one ConfigMap per running controller per process, written by
// the heartbeat controllers below: the tests read from the API who runs what.
const heartbeatNamespace = "nephele-heartbeats"

// TestMain lets the test binary double as a cloud-controller-manager (runCCM), so that
// tests can start replicas as real processes, kill them with SIGKILL (no lease release)
// or stop them with SIGTERM.
func TestMain(m *testing.M) {
	proctest.Main(runCCM)
	os.Exit(shared.Main(m))
}

func runCCM() int {
	reg := cloud.NewRegistry()
	if err := reg.Register("fake", func(io.Reader) (cloud.Provider, error) { return fakecloud.New(fakecloud.Options{}) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := local.Register(reg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The names of upstream providers whose manifests TestUpstreamManifestsStart runs, as
	// a provider team's binary built on nephele registers its own name.
	for _, name := range upstreamProviderNames {
		if err := reg.Register(name, func(io.Reader) (cloud.Provider, error) { return fakecloud.New(fakecloud.Options{}) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	cmd := manager.NewCommand("test-ccm", reg, heartbeatSpecs())
	return manager.Execute(cmd)
}

// heartbeatSpecs registers controllers under the real canonical names and aliases, each
// of which, while running, keeps a ConfigMap named <controller>.<pid> fresh and makes
// one cloud call per beat (a load balancer read), so that a test counting calls at the
// cloud sees who calls while leading. A call the manager's fence refuses is logged as
// "cloud call fenced".
func heartbeatSpecs() []manager.ControllerSpec {
	mk := func(name, clientName string, aliases ...string) manager.ControllerSpec {
		return manager.ControllerSpec{
			Name:       name,
			Aliases:    aliases,
			ClientName: clientName,
			New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
				return manager.ControllerFunc(func(ctx context.Context) error {
					cmName := fmt.Sprintf("%s.%d", cc.Name, os.Getpid())
					cms := cc.Client.CoreV1().ConfigMaps(heartbeatNamespace)
					// Who the apiserver takes this controller's client for.
					user := "unknown"
					if r, err := cc.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
						user = r.Status.UserInfo.Username
					}
					for {
						cm := &corev1.ConfigMap{
							ObjectMeta: metav1.ObjectMeta{Name: cmName, Labels: map[string]string{"pid": strconv.Itoa(os.Getpid())}},
							Data:       map[string]string{"beat": time.Now().Format(time.RFC3339Nano), "user": user},
						}
						if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
							_, _ = cms.Create(ctx, cm, metav1.CreateOptions{})
						}
						if lbs, ok := cc.Cloud.LoadBalancers(); ok {
							_, err := lbs.GetLoadBalancer(ctx, &cloud.LoadBalancerSpec{Name: "heartbeat-" + cc.Name}, nil)
							if errors.Is(err, cloud.ErrFenced) {
								fmt.Fprintf(os.Stderr, "heartbeat %s: cloud call fenced: %v\n", cc.Name, err)
							}
						}
						cc.Health.Progressed()
						select {
						case <-ctx.Done():
							return nil
						case <-time.After(300 * time.Millisecond):
						}
					}
				}), nil
			},
		}
	}
	return []manager.ControllerSpec{
		mk(manager.CloudNodeController, "node-controller", "cloud-node"),
		mk(manager.CloudNodeLifecycleController, "node-controller", "cloud-node-lifecycle"),
		mk(manager.ServiceLBController, "service-controller", "service", "service-controller"),
		mk(manager.NodeRouteController, "route-controller", "route", "route-controller"),
	}
}

// startCCM starts a manager process with the env's kubeconfig and the given flags.
func startCCM(t *testing.T, env *controlplane.Env, args ...string) *proctest.Process {
	t.Helper()
	base := []string{"--cloud-provider=fake", "--kubeconfig=" + env.Kubeconfig, "--secure-port=0",
		"--cluster-cidr=10.244.0.0/16", "--v=2"}
	return proctest.Start(t, "manager", append(base, args...)...)
}

// stopTimeout bounds how long a manager takes to stop after SIGTERM.
const stopTimeout = 30 * time.Second

// shared is the control plane of this package's tests, with the namespace the heartbeat
// controllers write to.
var shared = testenv.Shared{
	Setup: func(ctx context.Context, env *controlplane.Env) error {
		_, err := env.Client.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: heartbeatNamespace}}, metav1.CreateOptions{})
		return err
	},
}

// env returns the control plane shared by the tests of this package.
func env(t *testing.T) *controlplane.Env { return shared.Env(t) }

// runners returns, per controller name, the pids whose heartbeat is younger than fresh.
func runners(t *testing.T, client kubernetes.Interface, fresh time.Duration) map[string][]int {
	t.Helper()
	cms, err := client.CoreV1().ConfigMaps(heartbeatNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing heartbeats: %v", err)
	}
	out := map[string][]int{}
	for _, cm := range cms.Items {
		beat, err := time.Parse(time.RFC3339Nano, cm.Data["beat"])
		if err != nil || time.Since(beat) > fresh {
			continue
		}
		i := strings.LastIndex(cm.Name, ".")
		pid, _ := strconv.Atoi(cm.Name[i+1:])
		out[cm.Name[:i]] = append(out[cm.Name[:i]], pid)
	}
	return out
}

func clearHeartbeats(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	err := client.CoreV1().ConfigMaps(heartbeatNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("clearing heartbeats: %v", err)
	}
}

func leaseHolder(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("reading lease %s: %v", name, err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// runsOnly returns nil when every controller in want runs, and all of them in pid
// alone; otherwise an error saying who runs what.
func runsOnly(r map[string][]int, pid int, want ...string) error {
	for _, name := range want {
		if len(r[name]) != 1 || r[name][0] != pid {
			return fmt.Errorf("runners %v, want %v in pid %d alone", r, want, pid)
		}
	}
	for _, pids := range r {
		for _, p := range pids {
			if p != pid {
				return fmt.Errorf("runners %v, want only pid %d", r, pid)
			}
		}
	}
	return nil
}

// leaderOf waits until one of a and b runs every controller and returns it first.
func leaderOf(t *testing.T, e *controlplane.Env, a, b *proctest.Process) (leader, follower *proctest.Process) {
	t.Helper()
	poll.Within(t, 60*time.Second, "one replica to run every controller", func() error {
		r := runners(t, e.Client, 2*time.Second)
		errA, errB := runsOnly(r, a.Pid(), allControllers...), runsOnly(r, b.Pid(), allControllers...)
		switch {
		case errA == nil:
			leader, follower = a, b
		case errB == nil:
			leader, follower = b, a
		default:
			return errors.Join(errA, errB)
		}
		return nil
	})
	return leader, follower
}

var allControllers = []string{manager.CloudNodeController, manager.CloudNodeLifecycleController,
	manager.ServiceLBController, manager.NodeRouteController}

func TestLeaderElectionFailover(t *testing.T) {
	e := env(t)
	clearHeartbeats(t, e.Client)
	const lease = "failover-ccm"
	// Short, upstream-proportioned timings keep the test quick.
	timing := []string{"--leader-elect-resource-name=" + lease, "--leader-elect-lease-duration=6s",
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	a := startCCM(t, e, timing...)
	b := startCCM(t, e, timing...)

	leader, follower := leaderOf(t, e, a, b)
	// Exactly one leader: over several renewals the follower never runs anything.
	for i := 0; i < 10; i++ {
		time.Sleep(300 * time.Millisecond)
		if err := runsOnly(runners(t, e.Client, time.Second), leader.Pid()); err != nil {
			t.Fatalf("two replicas run controllers at once: %v", err)
		}
	}
	if h := leaseHolder(t, e.Client, lease); h == "" {
		t.Fatal("the lease has no holder while a replica leads")
	}

	// SIGKILL: the lease is not released, so the follower must wait for it to expire.
	// It takes over within takeoverBound (see there) of the leader's last renewal.
	clearHeartbeats(t, e.Client)
	killed := time.Now()
	leader.Kill()
	// Read right after the kill, the lease still holds the leader's last renewal.
	before := leaseRecord(t, e.Client, lease)
	const leaseDuration, retryPeriod = 6 * time.Second, time.Second
	bound := takeoverBound(leaseDuration, retryPeriod)
	poll.Within(t, bound+10*time.Second, "the follower to take over after the leader was killed",
		func() error { return runsOnly(runners(t, e.Client, time.Second), follower.Pid(), allControllers...) })
	running := time.Since(killed)
	after := leaseRecord(t, e.Client, lease)
	if *before.Spec.HolderIdentity == *after.Spec.HolderIdentity {
		t.Fatalf("lease holder after the kill is still %s", *after.Spec.HolderIdentity)
	}
	// Every time here is this machine's clock: the replicas and the test share it.
	lastRenew := before.Spec.RenewTime.Time
	acquired := after.Spec.AcquireTime.Time
	takeover := acquired.Sub(killed)
	t.Logf("takeover after SIGKILL: lease acquired %s after the kill, %s after the leader's last renewal; controllers running %s after the kill (lease duration %s, retry period %s, bound %s)",
		takeover.Round(10*time.Millisecond), acquired.Sub(lastRenew).Round(10*time.Millisecond), running.Round(10*time.Millisecond),
		leaseDuration, retryPeriod, bound)
	// The bound counts from the last renewal, which comes before the kill; a second of
	// slack covers the apiserver's latency on a loaded machine.
	if takeover > bound+time.Second {
		t.Errorf("the lease was taken over %s after the kill, above the bound of %s", takeover, bound)
	}
}

// takeoverBound is how long after a leader's last renewal a follower may take the lease
// over, at most, apiserver latency aside. client-go's follower retries every retry
// period times 1 + rand×JitterFactor (1.2), so at most 2.2 retry periods apart. It
// sees the last renewal at its first retry after it, up to 2.2 retry periods late; it
// counts the lease duration from then, and takes over at its first retry after that,
// up to another 2.2 retry periods late: lease duration + 2 × 2.2 × retry period.
func takeoverBound(leaseDuration, retryPeriod time.Duration) time.Duration {
	const jitterFactor = 1.2 // k8s.io/client-go/tools/leaderelection.JitterFactor
	return leaseDuration + 2*time.Duration(float64(retryPeriod)*(1+jitterFactor))
}

func leaseRecord(t *testing.T, client kubernetes.Interface, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading lease %s: %v", name, err)
	}
	if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.AcquireTime == nil {
		t.Fatalf("lease %s has no holder, renew or acquire time: %+v", name, l.Spec)
	}
	return l
}

func TestGracefulStopReleasesLease(t *testing.T) {
	e := env(t)
	clearHeartbeats(t, e.Client)
	const lease = "graceful-ccm"
	// A long lease: a successor can only take over quickly if the leader released it.
	timing := []string{"--leader-elect-resource-name=" + lease, "--leader-elect-lease-duration=60s",
		"--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=1s"}
	a := startCCM(t, e, timing...)
	poll.Within(t, 60*time.Second, "the first replica to lead", func() error {
		return runsOnly(runners(t, e.Client, 2*time.Second), a.Pid(), allControllers...)
	})
	b := startCCM(t, e, timing...)
	time.Sleep(3 * time.Second) // b is campaigning and must not lead
	if r := runners(t, e.Client, time.Second); runsOnly(r, a.Pid()) != nil {
		t.Fatalf("the second replica runs controllers while the first leads: %v", r)
	}
	stopped := time.Now()
	a.Stop(t, stopTimeout)
	if !strings.Contains(a.Output(), "Released lease") {
		t.Errorf("the stopped leader did not log releasing its lease; output:\n%s", a.Output())
	}
	// Released: the successor needs one retry period, far less than the 60s lease.
	poll.Within(t, 20*time.Second, "the second replica to take over the released lease", func() error {
		return runsOnly(runners(t, e.Client, time.Second), b.Pid(), allControllers...)
	})
	t.Logf("takeover after SIGTERM took %s (lease duration 60s)", time.Since(stopped).Round(100*time.Millisecond))
}

func TestControllersFlag(t *testing.T) {
	e := env(t)
	tests := []struct {
		flag string
		want []string
	}{
		{"*", allControllers},
		{"*,-route,-cloud-node-lifecycle", []string{manager.CloudNodeController, manager.ServiceLBController}},
		{"cloud-node,service-lb-controller", []string{manager.CloudNodeController, manager.ServiceLBController}},
	}
	for i, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			clearHeartbeats(t, e.Client)
			c := startCCM(t, e, "--controllers="+tt.flag, fmt.Sprintf("--leader-elect-resource-name=controllers-%d", i))
			poll.Within(t, 60*time.Second, "the selected controllers to run", func() error {
				return runsOnly(runners(t, e.Client, 2*time.Second), c.Pid(), tt.want...)
			})
			time.Sleep(time.Second)
			r := runners(t, e.Client, 2*time.Second)
			if len(r) != len(tt.want) {
				t.Fatalf("--controllers=%s runs %v, want exactly %v", tt.flag, r, tt.want)
			}
			c.Stop(t, stopTimeout)
		})
	}
}

func TestInvalidFlagsExitOneLine(t *testing.T) {
	dir := t.TempDir()
	badMigration := filepath.Join(dir, "migration.yaml")
	if err := os.WriteFile(badMigration, []byte("kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: x\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--controllers=*,frobnicator"}, `invalid value for --controllers`},
		{[]string{"--node-monitor-period=-5s"}, `invalid value for --node-monitor-period`},
		{[]string{"--route-reconciliation-period=-1m"}, `invalid value for --route-reconciliation-period`},
		{[]string{"--cloud-config=" + filepath.Join(dir, "missing.conf")}, `invalid value for --cloud-config`},
		{[]string{"--enable-leader-migration", "--leader-migration-config=" + badMigration}, `invalid value for --leader-migration-config`},
		{[]string{"--secure-port=70000"}, `invalid value for --secure-port`},
		{[]string{"--concurrent-service-syncs=0"}, `invalid value for --concurrent-service-syncs`},
		{[]string{"--no-such-flag"}, "unknown flag --no-such-flag: neither upstream's cloud-controller-manager"},
		{[]string{"--feature-gates=NoSuchGate=true"}, `invalid value for --feature-gates: "NoSuchGate=true": unknown feature gate "NoSuchGate"`},
		{[]string{"--tls-cipher-suites=TLS_NO_SUCH_SUITE"}, `invalid value for --tls-cipher-suites`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			p := proctest.Start(t, "manager", append([]string{"--cloud-provider=fake", "--kubeconfig=" + kubeconfig}, tt.args...)...)
			code := p.Wait(t, stopTimeout)
			out := p.Output()
			if code != 1 {
				t.Fatalf("exit code %d, want 1; output:\n%s", code, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("output = %q, want one line containing %q", out, tt.want)
			}
		})
	}
}

func TestServingHealthAndAuth(t *testing.T) {
	e := env(t)
	port := int(testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1")))
	c := startCCM(t, e, "--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--leader-elect-resource-name=serving-ccm")
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The manager registers a controller's check when it builds the controller, so
	// /readyz can pass before the last controller is built: wait for every check.
	poll.Within(t, 60*time.Second, "/readyz to be ok with every controller running", func() error {
		code, body := get("/readyz?verbose", "")
		if code != http.StatusOK {
			return fmt.Errorf("/readyz = %d %.200s", code, body)
		}
		for _, name := range allControllers {
			if !strings.Contains(body, "[+]"+name+" ok") {
				return fmt.Errorf("no passing check for %s yet:\n%s", name, body)
			}
		}
		return nil
	})
	code, body := get("/readyz?verbose", "")
	for _, name := range append([]string{"leader-election"}, allControllers...) {
		if !strings.Contains(body, "[+]"+name+" ok") {
			t.Errorf("/readyz?verbose lacks a passing check for %s:\n%s", name, body)
		}
	}
	if code, _ := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := get("/livez", ""); code != http.StatusOK {
		t.Errorf("/livez = %d, want 200", code)
	}
	_ = code

	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token = %d, want 401", code)
	}
	if code, _ := get("/metrics", "not-a-valid-token"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a bad token = %d, want 401", code)
	}
	code, body = get("/metrics", e.Token)
	if code != http.StatusOK || !strings.Contains(body, "nephele_leader") {
		t.Errorf("/metrics as cluster admin = %d, want 200 with nephele_leader; body starts %.200q", code, body)
	}
	// A service account without RBAC for /metrics is authenticated but not authorized.
	saToken := serviceAccountToken(t, e.Client, "metrics-reader")
	if code, _ := get("/metrics", saToken); code != http.StatusForbidden {
		t.Errorf("/metrics as an unauthorized service account = %d, want 403", code)
	}
	grantMetrics(t, e.Client, "metrics-reader")
	poll.Within(t, 30*time.Second, "the service account to be let read /metrics once granted", func() error {
		if code, body := get("/metrics", saToken); code != http.StatusOK {
			return fmt.Errorf("/metrics = %d %.200s", code, body)
		}
		return nil
	})
	if code, _ := get("/debug/pprof/", saToken); code != http.StatusForbidden {
		t.Errorf("/debug/pprof/ for a token allowed only /metrics = %d, want 403", code)
	}
	if code, _ := get("/debug/pprof/", e.Token); code != http.StatusOK {
		t.Errorf("/debug/pprof/ as cluster admin = %d, want 200", code)
	}
	c.Stop(t, stopTimeout)
}

func serviceAccountToken(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	ctx := context.Background()
	_, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating service account: %v", err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().ServiceAccounts("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	tr, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	return tr.Status.Token
}

func grantMetrics(t *testing.T, client kubernetes.Interface, sa string) {
	t.Helper()
	ctx := context.Background()
	_, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating cluster role: %v", err)
	}
	// Removed when the test ends, so that it runs again on the same control plane.
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoles().Delete(context.Background(), "test-metrics-reader", metav1.DeleteOptions{})
	})
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "test-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: sa}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating cluster role binding: %v", err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), "test-metrics-reader", metav1.DeleteOptions{})
	})
}

// migrationConfig is the upstream LeaderMigrationConfiguration both components read,
// each naming itself as the owner of the migrating controllers.
func migrationConfig(t *testing.T, component string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), component+"-migration.yaml")
	cfg := `kind: LeaderMigrationConfiguration
apiVersion: controllermanager.config.k8s.io/v1
leaderName: cloud-provider-extraction-migration
controllerLeaders:
  - name: route-controller
    component: ` + component + `
  - name: service-controller
    component: ` + component + `
  - name: cloud-node-lifecycle-controller
    component: ` + component + `
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLeaderMigrationWithKubeControllerManager(t *testing.T) {
	e := env(t)
	clearHeartbeats(t, e.Client)
	const migrationLease = "cloud-provider-extraction-migration"
	timing := []string{"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=5s", "--leader-elect-retry-period=1s"}
	ctx := context.Background()

	// kube-controller-manager v1.36 exits when it takes a migration lease (an upstream bug,
	// see hack/tools/kcm135), so the peer is v1.35: the version a cluster migrating to an
	// external CCM typically still runs.
	kcm, err := e.StartControllerManagerBinary(ctx, controlplane.ControllerManagerV135, append([]string{"--leader-elect=true", "--enable-leader-migration",
		"--leader-migration-config=" + migrationConfig(t, "kube-controller-manager")}, timing...)...)
	if err != nil {
		t.Fatalf("starting kube-controller-manager: %v", err)
	}
	var kcmIdentity string
	poll.Within(t, 60*time.Second, "kube-controller-manager to hold the migration lease", func() error {
		if kcmIdentity = leaseHolder(t, e.Client, migrationLease); kcmIdentity == "" {
			return errors.New("the lease has no holder")
		}
		return nil
	})
	select {
	case <-kcm.Done():
		t.Fatalf("kube-controller-manager exited after taking the migration lease: %v (log %s)", kcm.Err(), kcm.LogPath())
	case <-time.After(2 * time.Second):
	}

	c := startCCM(t, e, append([]string{"--enable-leader-migration", "--leader-elect-resource-name=migrating-ccm",
		"--leader-migration-config=" + migrationConfig(t, "cloud-controller-manager")}, timing...)...)
	poll.Within(t, 60*time.Second, "nephele to run the controller it owns outright", func() error {
		return runsOnly(runners(t, e.Client, 2*time.Second), c.Pid(), manager.CloudNodeController)
	})
	// While kube-controller-manager holds the migration lease, the migrated controllers
	// must not run here.
	for i := 0; i < 10; i++ {
		r := runners(t, e.Client, time.Second)
		for _, name := range []string{manager.CloudNodeLifecycleController, manager.ServiceLBController, manager.NodeRouteController} {
			if len(r[name]) > 0 {
				t.Fatalf("%s runs in nephele while kube-controller-manager holds the migration lease", name)
			}
		}
		if h := leaseHolder(t, e.Client, migrationLease); h != kcmIdentity {
			t.Fatalf("migration lease holder changed to %q while kube-controller-manager runs", h)
		}
		time.Sleep(500 * time.Millisecond)
	}

	stopped := time.Now()
	if err := kcm.Stop(); err != nil {
		t.Fatalf("stopping kube-controller-manager: %v", err)
	}
	poll.Within(t, 60*time.Second, "nephele to take the migration lease and start the migrated controllers", func() error {
		return runsOnly(runners(t, e.Client, 2*time.Second), c.Pid(), allControllers...)
	})
	if h := leaseHolder(t, e.Client, migrationLease); h == kcmIdentity || h == "" {
		t.Fatalf("migration lease holder = %q after the handover, want nephele's identity", h)
	}
	t.Logf("handover took %s after kube-controller-manager stopped", time.Since(stopped).Round(100*time.Millisecond))
	c.Stop(t, stopTimeout)
}

func TestServiceAccountCredentials(t *testing.T) {
	e := env(t)
	clearHeartbeats(t, e.Client)
	ctx := context.Background()
	grantHeartbeats(t, e.Client)

	c := startCCM(t, e, "--use-service-account-credentials", "--leader-elect-resource-name=sa-ccm")
	poll.Within(t, 60*time.Second, "every controller to run with its own credentials", func() error {
		return runsOnly(runners(t, e.Client, 2*time.Second), c.Pid(), allControllers...)
	})
	want := map[string]string{
		manager.CloudNodeController:          "system:serviceaccount:kube-system:node-controller",
		manager.CloudNodeLifecycleController: "system:serviceaccount:kube-system:node-controller",
		manager.ServiceLBController:          "system:serviceaccount:kube-system:service-controller",
		manager.NodeRouteController:          "system:serviceaccount:kube-system:route-controller",
	}
	for name, user := range want {
		cm, err := e.Client.CoreV1().ConfigMaps(heartbeatNamespace).Get(ctx, fmt.Sprintf("%s.%d", name, c.Pid()), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("heartbeat of %s: %v", name, err)
		}
		if cm.Data["user"] != user {
			t.Errorf("%s authenticates as %q, want %q", name, cm.Data["user"], user)
		}
	}
	c.Stop(t, stopTimeout)
}

// grantHeartbeats lets the controllers' service accounts (--use-service-account-credentials)
// write heartbeats; nothing else is granted. Tests sharing the control plane may each
// call it.
func grantHeartbeats(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	_, err := client.RbacV1().Roles(heartbeatNamespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "heartbeats"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var subjects []rbacv1.Subject
	for _, sa := range []string{"node-controller", "service-controller", "route-controller"} {
		subjects = append(subjects, rbacv1.Subject{Kind: "ServiceAccount", Namespace: "kube-system", Name: sa})
	}
	_, err = client.RbacV1().RoleBindings(heartbeatNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "heartbeats"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "heartbeats"},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
