package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/handover"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// migrateTiming are the lease timings of every controller manager in the migration
// test: short, in upstream's proportions, so that takeovers take seconds.
var migrateTiming = []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

// transcript records the `nephele migrate` commands a test ran and what they printed,
// as a person following docs/migration.md would see them. With
// NEPHELE_MIGRATE_TRANSCRIPT set it is written to that file.
type transcript struct {
	strings.Builder
}

func (tr *transcript) note(format string, args ...any) { fmt.Fprintf(tr, "# "+format+"\n", args...) }

// migrate runs `nephele migrate args...` against the env and records it; it fails the
// test unless the exit code is want.
func (tr *transcript) migrate(t *testing.T, env *controlplane.Env, want int, args ...string) string {
	t.Helper()
	p := proctest.Start(t, "nephele migrate", append(append([]string{"migrate"}, args...), "--kubeconfig", env.Kubeconfig)...)
	code := p.Wait(t, time.Minute)
	out := p.Output()
	fmt.Fprintf(tr, "$ nephele migrate %s\n%s", strings.Join(args, " "), out)
	if code != 0 {
		fmt.Fprintf(tr, "(exit code %d)\n", code)
	}
	tr.WriteString("\n")
	if code != want {
		t.Fatalf("nephele migrate %s exited %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
	}
	return out
}

// leases reads the leases as `nephele migrate` does.
func leasesNow(t *testing.T, env *controlplane.Env) *handover.Snapshot {
	t.Helper()
	s, err := handover.Survey(t.Context(), env.Client, handover.DefaultNamespace, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameHolder returns nil once lease a is held, by the holder of lease b.
func sameHolder(t *testing.T, env *controlplane.Env, a, b string) error {
	s := leasesNow(t, env)
	la, okA := s.Lease(a)
	lb, okB := s.Lease(b)
	switch {
	case !okA || !la.Held(s.Time):
		return fmt.Errorf("lease %s is not held", a)
	case !okB || !lb.Held(s.Time):
		return fmt.Errorf("lease %s is not held", b)
	case la.Holder != lb.Holder:
		return fmt.Errorf("lease %s is held by %s, lease %s by %s", a, la.Holder, b, lb.Holder)
	}
	return nil
}

// TestMigrateFromKubeControllerManagerAndBack moves the cloud controllers from a real
// kube-controller-manager (v1.35, the realistic peer) to nephele's cloud-controller-manager
// and back, following `nephele migrate plan` with the configuration files it prints, and
// checking each step with `nephele migrate status` and `check`. kube-controller-manager
// v1.31 and later has no in-tree provider, so its cloud controllers are stubs, but it
// takes part in leader migration as any release does: the leases are real.
func TestMigrateFromKubeControllerManagerAndBack(t *testing.T) {
	env := testenv.New(t, controlplane.Options{})
	ctx := t.Context()
	var tr transcript
	defer func() {
		t.Logf("transcript:\n%s", tr.String())
		if path := os.Getenv("NEPHELE_MIGRATE_TRANSCRIPT"); path != "" {
			if err := os.WriteFile(path, []byte(tr.String()), 0o644); err != nil {
				t.Error(err)
			}
		}
	}()

	// The cloud, two instances and their Nodes, and a LoadBalancer Service nobody
	// serves yet: kube-controller-manager v1.35 has no cloud provider.
	cloud := startLocalcloud(t)
	tok, err := os.ReadFile(cloud.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.New(cloud.endpoint, strings.TrimSpace(string(tok)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-a", "node-b"} {
		inst, err := cc.CreateInstance(ctx, api.InstanceSpec{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.NodeSpec{ProviderID: "local://" + inst.ID}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The runbook's files, as the plan prints them.
	rb, err := handover.NewRunbook(leasesNow(t, env), handover.Move{From: handover.FromKubeControllerManager},
		handover.Target{Provider: "local", InTreeProvider: "local", Specs: controllers.Default()})
	if err != nil {
		t.Fatal(err)
	}
	files, err := rb.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kcmFile, nephFile := files["leader-migration-kube-controller-manager.yaml"], files["leader-migration-nephele.yaml"]
	if kcmFile == "" || nephFile == "" {
		t.Fatalf("the runbook has files %v, want kube-controller-manager's and nephele's", files)
	}

	bin := clustertest.Commands(t, "cloud-controller-manager")
	cloudConfig := cloudConfig(t, cloud.endpoint, cloud.tokenFile)
	startNephele := func(migrating bool) *proctest.Process {
		args := append([]string{"--cloud-provider=local", "--cloud-config=" + cloudConfig, "--kubeconfig=" + env.Kubeconfig,
			"--secure-port=0", "--configure-cloud-routes=false", "--cluster-name=migrate-test", "--v=2"}, migrateTiming...)
		if migrating {
			args = append(args, "--enable-leader-migration", "--leader-migration-config="+nephFile)
		}
		return proctest.Exec(t, "nephele cloud-controller-manager", filepath.Join(bin, "cloud-controller-manager"), args...)
	}
	startKCM := func(migrating bool) *controlplane.Process {
		args := append([]string{"--leader-elect=true"}, migrateTiming...)
		if migrating {
			args = append(args, "--enable-leader-migration", "--leader-migration-config="+kcmFile)
		}
		p, err := env.StartControllerManagerBinary(ctx, controlplane.ControllerManagerV135, args...)
		if err != nil {
			t.Fatalf("starting kube-controller-manager: %v", err)
		}
		return p
	}
	const (
		kcmLease       = handover.KubeControllerManagerLease
		nepheleLease   = "cloud-controller-manager"
		migrationLease = "cloud-provider-extraction-migration"
	)

	tr.note("kube-controller-manager runs the cloud controllers (here v1.35, whose in-tree providers are gone: stubs, under real leases)")
	kcm := startKCM(false)
	poll.Eventually(t, "kube-controller-manager to lead", func() error { return sameHolder(t, env, kcmLease, kcmLease) })
	tr.migrate(t, env, 0, "plan", "--from", "kube-controller-manager", "--provider", "local", "--in-tree-provider", "local")

	tr.note("step 1: kube-controller-manager with leader migration")
	if err := kcm.Stop(); err != nil {
		t.Fatal(err)
	}
	kcm = startKCM(true)
	poll.Within(t, 2*time.Minute, "kube-controller-manager to hold the migration lease", func() error {
		return sameHolder(t, env, migrationLease, kcmLease)
	})
	tr.migrate(t, env, 0, "status")

	tr.note("step 2: nephele with leader migration")
	neph := startNephele(true)
	poll.Within(t, 2*time.Minute, "nephele to lead on its own lease", func() error {
		return sameHolder(t, env, nepheleLease, nepheleLease)
	})
	if err := sameHolder(t, env, migrationLease, kcmLease); err != nil {
		t.Fatalf("nephele took the migration lease from a running kube-controller-manager: %v", err)
	}
	tr.migrate(t, env, 0, "status")
	out := tr.migrate(t, env, 1, "check", "--from", "kube-controller-manager", "--provider", "local")
	if !strings.Contains(out, "FAIL  lease kube-system/"+migrationLease+": held by") {
		t.Errorf("check does not fail on the migration lease kube-controller-manager holds:\n%s", out)
	}

	tr.note("step 3: kube-controller-manager without the cloud provider and leader migration")
	stopped := time.Now()
	if err := kcm.Stop(); err != nil {
		t.Fatal(err)
	}
	kcm = startKCM(false)
	poll.Within(t, 2*time.Minute, "nephele to take the migration lease over", func() error {
		return sameHolder(t, env, migrationLease, nepheleLease)
	})
	took := acquiredAfter(t, env, migrationLease, stopped)
	tr.note("nephele acquired the migration lease %s after kube-controller-manager was stopped (lease duration 6s, retry period 1s)", took.Round(10*time.Millisecond))
	t.Logf("handover from kube-controller-manager: %s", took)
	poll.Within(t, 2*time.Minute, "nephele to serve the LoadBalancer Service", func() error {
		svc, err := env.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return errors.New("no address yet")
		}
		return nil
	})
	tr.migrate(t, env, 0, "status")
	tr.migrate(t, env, 0, "check", "--from", "kube-controller-manager", "--provider", "local")

	tr.note("step 5: nephele without leader migration")
	neph.Stop(t, stopTimeout)
	neph = startNephele(false)
	poll.Within(t, 2*time.Minute, "nephele to lead again", func() error { return sameHolder(t, env, nepheleLease, nepheleLease) })
	tr.migrate(t, env, 0, "check", "--from", "kube-controller-manager", "--provider", "local")

	tr.note("rollback")
	tr.migrate(t, env, 0, "plan", "--from", "kube-controller-manager", "--rollback", "--provider", "local", "--in-tree-provider", "local")
	tr.note("rollback step 1: nephele with leader migration")
	neph.Stop(t, stopTimeout)
	neph = startNephele(true)
	poll.Within(t, 2*time.Minute, "nephele to hold the migration lease", func() error {
		return sameHolder(t, env, migrationLease, nepheleLease)
	})
	tr.note("rollback step 3: kube-controller-manager with leader migration (it waits)")
	if err := kcm.Stop(); err != nil {
		t.Fatal(err)
	}
	kcm = startKCM(true)
	poll.Within(t, 2*time.Minute, "kube-controller-manager to lead", func() error { return sameHolder(t, env, kcmLease, kcmLease) })
	time.Sleep(3 * time.Second) // several retry periods: it must go on waiting
	if err := sameHolder(t, env, migrationLease, nepheleLease); err != nil {
		t.Fatalf("kube-controller-manager took the migration lease from a running nephele: %v", err)
	}
	tr.migrate(t, env, 0, "status")
	tr.note("rollback step 4: stop nephele")
	stopped = time.Now()
	neph.Stop(t, stopTimeout)
	poll.Within(t, time.Minute, "kube-controller-manager to take the migration lease over", func() error {
		return sameHolder(t, env, migrationLease, kcmLease)
	})
	took = acquiredAfter(t, env, migrationLease, stopped)
	tr.note("kube-controller-manager acquired the migration lease %s after nephele was stopped (nephele releases it)", took.Round(10*time.Millisecond))
	t.Logf("handover back to kube-controller-manager: %s", took)
	tr.migrate(t, env, 0, "status")
	_ = kcm.Stop()
}

// acquiredAfter returns how long after since the named lease was acquired by its holder.
func acquiredAfter(t *testing.T, env *controlplane.Env, name string, since time.Time) time.Duration {
	t.Helper()
	l, err := env.Client.CoordinationV1().Leases(handover.DefaultNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.AcquireTime == nil {
		t.Fatalf("lease %s has no acquire time", name)
	}
	return l.Spec.AcquireTime.Sub(since)
}

func TestMigrateFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--from", "kcm"}, `invalid value for --from: "kcm"`},
		{[]string{"check", "--uninitialized-bound", "0s"}, "invalid value for --uninitialized-bound"},
		{[]string{"status", "--interval", "0s"}, "invalid value for --interval"},
		{[]string{"plan", "--rollback"}, "--rollback needs --from"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// An unreachable cluster: the flags must be refused before it matters, or
			// the error must say what it is.
			p := proctest.Start(t, "nephele migrate", append([]string{"migrate", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, tt.args...)...)
			if code := p.Wait(t, time.Minute); code != 1 {
				t.Fatalf("exit code %d, want 1; output:\n%s", code, p.Output())
			}
			if !strings.Contains(p.Output(), tt.want) {
				t.Errorf("output %q does not say %q", p.Output(), tt.want)
			}
		})
	}
}

func TestMigrateStatusWatchRidesOutErrorsUntilStopped(t *testing.T) {
	// No cluster at all: each refresh says so on stderr, and the watch goes on until
	// it is interrupted, then exits cleanly.
	p := proctest.Start(t, "nephele migrate", "migrate", "status", "--watch", "--interval", "100ms",
		"--kubeconfig", filepath.Join(t.TempDir(), "none"))
	poll.Eventually(t, "three refreshes", func() error {
		if n := strings.Count(p.Output(), "(every 100ms)"); n < 3 {
			return fmt.Errorf("%d refreshes so far:\n%s", n, p.Output())
		}
		return nil
	})
	if !strings.Contains(p.Output(), "migrate status: --kubeconfig:") {
		t.Errorf("the watch does not say why it cannot read the cluster:\n%s", p.Output())
	}
	p.Stop(t, time.Minute)
}
