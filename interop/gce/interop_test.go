package gce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/filter"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	"github.com/spf13/pflag"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/upstream"
)

var vals = Values{Project: "nephele-interop", Region: "us-central1", Zone: "us-central1-b", Network: "default"}

// node is a VM of the mock and the Node that registers for it.
type node struct{ name, internalIP, externalIP, podCIDR string }

var nodes = []node{
	{"gce-node-1", "10.128.0.2", "203.0.113.2", "10.64.1.0/24"},
	{"gce-node-2", "10.128.0.3", "203.0.113.3", "10.64.2.0/24"},
}

// TestGCEProviderOnNephele runs nephele's manager, with its four controllers, on GCE's
// provider code (unchanged, on its own in-memory compute API) against a real control
// plane: Nodes initialize with GCE's provider ID and topology, routes are GCE routes, a
// LoadBalancer Service gets GCE's target pool, forwarding rule and firewall and an
// ingress IP, deleting it deletes them, and a VM removed from the cloud takes its Node
// with it.
func TestGCEProviderOnNephele(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	env := testenv.New(t, controlplane.Options{})

	// GCE's provider builds its TPU client from Application Default Credentials whatever
	// token source it is given (newTPUService in v0.28.2): give it some that work
	// offline. Nothing calls the TPU API, so they are never exchanged for a token.
	adc := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(adc, []byte(`{"type": "authorized_user", "client_id": "interop", "client_secret": "interop", "refresh_token": "interop"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", adc)

	m, err := NewMock(vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := m.AddInstance(ctx, n.name, "n1-standard-2", n.internalIP, n.externalIP); err != nil {
			t.Fatal(err)
		}
	}

	// A GCE CCM's main on nephele: register GCE's provider, run the manager.
	reg := cloud.NewRegistry()
	if err := reg.Register("gce", func(io.Reader) (cloud.Provider, error) { return upstream.New(m.Cloud) }); err != nil {
		t.Fatal(err)
	}
	// The flags a GCE CCM's manifest passes, parsed as the command parses them. The
	// manager runs in this process (the test reads the mock it calls) through
	// manager.Run, which leaves process-wide settings (klog's logger) alone, unlike the
	// command a binary's main runs.
	o := manager.NewOptions()
	fs := pflag.NewFlagSet("gce-cloud-controller-manager", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{
		"--cloud-provider=gce", "--kubeconfig=" + env.Kubeconfig, "--secure-port=0",
		"--cluster-name=interop", "--cluster-cidr=10.64.0.0/14", "--configure-cloud-routes=true",
		"--leader-elect=false", "--node-monitor-period=1s", "--node-deletion-grace-period=1s",
	}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Complete(controllers.Default())
	if err != nil {
		t.Fatal(err)
	}
	ccmCtx, stopCCM := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- manager.Run(ccmCtx, cfg, reg) }()
	t.Cleanup(func() {
		stopCCM()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the manager: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the manager did not stop within a minute")
		}
	})

	client := env.Client
	for _, n := range nodes {
		_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Spec: corev1.NodeSpec{
				PodCIDR:  n.podCIDR,
				PodCIDRs: []string{n.podCIDR},
				Taints:   []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("nodes initialize with GCE's provider ID and topology", func(t *testing.T) {
		for _, n := range nodes {
			poll.Within(t, 90*time.Second, n.name+" to be initialized", func() error {
				got, err := client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
					return errors.New("still tainted")
				}
				want := map[string]string{
					corev1.LabelTopologyZone:       vals.Zone,
					corev1.LabelTopologyRegion:     vals.Region,
					corev1.LabelInstanceTypeStable: "n1-standard-2",
				}
				for k, v := range want {
					if got.Labels[k] != v {
						return fmt.Errorf("label %s=%q, want %q", k, got.Labels[k], v)
					}
				}
				if id := fmt.Sprintf("gce://%s/%s/%s", vals.Project, vals.Zone, n.name); got.Spec.ProviderID != id {
					return fmt.Errorf("provider ID %q, want %q", got.Spec.ProviderID, id)
				}
				for _, a := range []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.internalIP}, {Type: corev1.NodeExternalIP, Address: n.externalIP}} {
					if !slices.Contains(got.Status.Addresses, a) {
						return fmt.Errorf("addresses %v lack %v", got.Status.Addresses, a)
					}
				}
				return nil
			})
		}
	})

	t.Run("routes are GCE routes to the nodes' instances", func(t *testing.T) {
		poll.Within(t, 90*time.Second, "a GCE route per node", func() error {
			routes, err := m.API.Routes().List(ctx, filter.None)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if !slices.ContainsFunc(routes, func(r *computeRoute) bool {
					return r.DestRange == n.podCIDR && strings.HasSuffix(r.NextHopInstance, "/instances/"+n.name) &&
						strings.HasPrefix(r.Name, "interop-") && r.Network == m.NetworkURL()
				}) {
					return fmt.Errorf("no route %s via %s among %d routes", n.podCIDR, n.name, len(routes))
				}
			}
			return nil
		})
	})

	t.Run("a LoadBalancer Service gets GCE's load balancer", func(t *testing.T) {
		svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lbName := cloudprovider.DefaultLoadBalancerName(svc)
		poll.Within(t, 90*time.Second, "the Service's ingress IP", func() error {
			got, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(got.Status.LoadBalancer.Ingress) == 0 || got.Status.LoadBalancer.Ingress[0].IP == "" {
				return errors.New("no ingress yet")
			}
			return nil
		})
		pool, err := m.API.TargetPools().Get(ctx, meta.RegionalKey(lbName, vals.Region))
		if err != nil {
			t.Fatalf("target pool %s: %v", lbName, err)
		}
		for _, n := range nodes {
			if !slices.ContainsFunc(pool.Instances, func(i string) bool { return strings.HasSuffix(i, "/instances/"+n.name) }) {
				t.Errorf("target pool %s lacks %s: %v", lbName, n.name, pool.Instances)
			}
		}
		if _, err := m.API.ForwardingRules().Get(ctx, meta.RegionalKey(lbName, vals.Region)); err != nil {
			t.Errorf("forwarding rule %s: %v", lbName, err)
		}
		if _, err := m.API.Firewalls().Get(ctx, meta.GlobalKey("k8s-fw-"+lbName)); err != nil {
			t.Errorf("firewall k8s-fw-%s: %v", lbName, err)
		}

		if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Within(t, 90*time.Second, "GCE's load balancer resources to be deleted with the Service", func() error {
			if _, err := m.API.ForwardingRules().Get(ctx, meta.RegionalKey(lbName, vals.Region)); !isNotFound(err) {
				return fmt.Errorf("forwarding rule: %v", err)
			}
			if _, err := m.API.TargetPools().Get(ctx, meta.RegionalKey(lbName, vals.Region)); !isNotFound(err) {
				return fmt.Errorf("target pool: %v", err)
			}
			if _, err := m.API.Firewalls().Get(ctx, meta.GlobalKey("k8s-fw-"+lbName)); !isNotFound(err) {
				return fmt.Errorf("firewall: %v", err)
			}
			if _, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the Service is still there (finalizer): %v", err)
			}
			return nil
		})
	})

	t.Run("a VM removed from the cloud takes its Node", func(t *testing.T) {
		gone := nodes[1].name
		// The lifecycle controller deletes only nodes that are not Ready.
		n, err := client.CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := m.RemoveInstance(ctx, gone); err != nil {
			t.Fatal(err)
		}
		poll.Within(t, 90*time.Second, "the Node of the removed VM to be deleted", func() error {
			if _, err := client.CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("node %s: %v", gone, err)
			}
			return nil
		})
		if _, err := client.CoreV1().Nodes().Get(ctx, nodes[0].name, metav1.GetOptions{}); err != nil {
			t.Errorf("the other node: %v", err)
		}
	})
}

type computeRoute = compute.Route

func isNotFound(err error) bool {
	var gerr *googleapi.Error
	return errors.As(err, &gerr) && gerr.Code == 404
}
