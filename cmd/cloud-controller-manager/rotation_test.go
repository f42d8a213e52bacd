package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/manager"
)

// replaceFile writes content to path as a Secret volume update does: a new file renamed
// over the old, so a reader sees one or the other, never half.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestCloudCredentialRotation rotates the CCM's cloud credential while LoadBalancer
// Services churn: the cloud takes the new token beside the old, the token file the cloud
// config names is replaced, and once the manager has reloaded (an Event on its Lease
// says so) the cloud drops the old token. No sync fails at any point, the manager keeps
// its process and its lease, and a Service created after the old token is gone is
// served.
func TestCloudCredentialRotation(t *testing.T) {
	ctx := t.Context()
	env := testenv.New(t, controlplane.Options{})
	nodeNet := testnet.LoopbackPrefix(119)
	srv, admin := servertest.Start(t, server.Config{
		Token: "rotation-admin", CCMToken: "ccm-old",
		VIPPool: testnet.LoopbackPrefix(120), InstanceCIDR: nodeNet, Logger: testlog.New(t, 0),
	})

	// Two initialized nodes, the backends of every load balancer.
	ip := nodeNet.Addr().Next()
	for i := range 2 {
		ip = ip.Next()
		inst, err := admin.CreateInstance(ctx, api.InstanceSpec{Name: fmt.Sprintf("node-%d", i+1),
			Addresses: []api.Address{{Type: api.AddressInternalIP, Address: ip.String()}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: inst.Name},
			Spec:       corev1.NodeSpec{ProviderID: "local://" + inst.ID},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	tokenFile := writeFile(t, "token", "ccm-old\n")
	cloudConfig := writeFile(t, "cloud.yaml", fmt.Sprintf("endpoint: %s\ntokenFile: %s\nrequestTimeout: 10s\n", srv.URL(), tokenFile))
	securePort := testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1"))
	ccm := proctest.Start(t, "cloud-controller-manager",
		"--cloud-provider=local", "--cloud-config="+cloudConfig, "--cloud-config-reload-period=100ms",
		"--kubeconfig="+env.Kubeconfig, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(int(securePort)),
		"--configure-cloud-routes=false", "--leader-elect-resource-name=rotation-ccm", "--v=2")

	services := env.Client.CoreV1().Services(metav1.NamespaceDefault)
	newService := func(name string) {
		_, err := services.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("creating Service %s: %v", name, err)
		}
	}
	served := func(name string) {
		t.Helper()
		poll.Within(t, pollTimeout, "Service "+name+" to be served", func() error {
			s, err := services.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(s.Status.LoadBalancer.Ingress) == 0 {
				return fmt.Errorf("no ingress")
			}
			return nil
		})
	}
	newService("before")
	served("before")
	lease, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "rotation-ccm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Churn: a Service made every 100ms, the one made three ticks before deleted.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []string
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			name := "churn-" + strconv.Itoa(i)
			newService(name)
			mu.Lock()
			made = append(made, name)
			mu.Unlock()
			if i >= 3 {
				if err := services.Delete(ctx, "churn-"+strconv.Itoa(i-3), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting a churned Service: %v", err)
				}
			}
		}
	})
	stopChurn := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopChurn()
	churned := func(n int) {
		t.Helper()
		poll.Within(t, pollTimeout, fmt.Sprintf("%d more churned Services", n), func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(made) < n {
				return fmt.Errorf("%d made", len(made))
			}
			return nil
		})
	}
	churned(5)

	// The rotation: new token beside the old, the file replaced, the old token dropped
	// once the manager says it reloaded.
	if err := srv.SetCCMTokens("ccm-old", "ccm-new"); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, tokenFile, "ccm-new\n")
	poll.Within(t, pollTimeout, "the manager to reload the cloud config", func() error {
		list, err := env.Client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Lease,involvedObject.name=rotation-ccm,reason=" + manager.EventCloudConfigReloaded})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no %s event yet", manager.EventCloudConfigReloaded)
		}
		return nil
	})
	if err := srv.SetCCMTokens("ccm-new"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	atRevocation := len(made)
	mu.Unlock()
	churned(atRevocation + 10)
	stopChurn()

	newService("after")
	served("after")
	mu.Lock()
	last := made[max(0, len(made)-3):]
	mu.Unlock()
	for _, name := range last {
		served(name)
	}

	families := scrape(t, env, securePort)
	// The families below exist (a renamed metric must fail the test, not read as 0).
	if n := families.Value("nephele_controller_syncs_total", map[string]string{"controller": manager.ServiceLBController}); n == 0 {
		t.Fatal("/metrics has no service-lb-controller syncs: the families this test reads are gone")
	}
	if _, ok := families["nephele_cloud_config_reload_failing"]; !ok {
		t.Fatal("/metrics has no nephele_cloud_config_reload_failing")
	}
	if n := families.Value("nephele_controller_sync_errors_total", nil); n != 0 {
		t.Errorf("%v failed syncs across the rotation, want none", n)
	}
	if n := families.Value("nephele_cloud_config_reloads_total", map[string]string{"result": "success"}); n != 1 {
		t.Errorf("successful reloads = %v, want 1", n)
	}
	if n := families.Value("nephele_cloud_config_reloads_total", map[string]string{"result": "failure"}); n != 0 {
		t.Errorf("failed reloads = %v, want 0", n)
	}
	select {
	case <-ccm.Done():
		t.Fatalf("the manager exited: %v", ccm.Err())
	default:
	}
	after, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "rotation-ccm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *after.Spec.HolderIdentity != *lease.Spec.HolderIdentity || *after.Spec.LeaseTransitions != *lease.Spec.LeaseTransitions {
		t.Errorf("the lease changed hands across the rotation: holder %s→%s, transitions %d→%d",
			*lease.Spec.HolderIdentity, *after.Spec.HolderIdentity, *lease.Spec.LeaseTransitions, *after.Spec.LeaseTransitions)
	}
	mu.Lock()
	t.Logf("%d Services churned, %d of them after the old token was dropped", len(made), len(made)-atRevocation)
	mu.Unlock()
}
