package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/internal/testkit/eventlog"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/manager"
)

// harness runs a controller against a fake clientset and a fake cloud.
type harness struct {
	t       *testing.T
	client  kubernetes.Interface
	cloud   *fakecloud.Cloud
	events  *eventlog.Log
	ctrl    *Controller
	metrics *prometheus.Registry
}

// newHarness starts a controller over objs. tweak may change the config before New.
func newHarness(t *testing.T, tweak func(*Config), objs ...runtime.Object) *harness {
	t.Helper()
	return startHarness(t, fake.NewClientset(objs...), tweak)
}

// startHarness starts a controller with a fake cloud of its own over client. Two on
// one client are two managers in one cluster, as with different load balancer classes.
// tweak may change the config before New; its LoadBalancers is the harness's
// *fakecloud.Cloud, to fill before the controller starts.
func startHarness(t *testing.T, client kubernetes.Interface, tweak func(*Config)) *harness {
	t.Helper()
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	h := &harness{t: t, client: client, cloud: fc, events: &eventlog.Log{}, metrics: prometheus.NewRegistry()}
	cfg := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    client,
			Informers: factory,
			Recorder:  h.events,
			Logger:    testlog.New(t, 0),
			Metrics:   h.metrics,
		},
		LoadBalancers:   fc,
		ClusterName:     "unit",
		Workers:         4,
		NodeBatchWindow: 100 * time.Millisecond,
		Retry:           worker.Retry{MinDelay: 50 * time.Millisecond, MaxDelay: time.Second},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	h.ctrl, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- h.ctrl.Run(ctx) }()
	t.Cleanup(func() {
		// Release anything a test left hanging, so that Run can return.
		fc.ClearFaults()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("the %v cache did not sync", typ)
		}
	}
	return h
}

func (h *harness) createService(svc *corev1.Service) *corev1.Service {
	h.t.Helper()
	out, err := h.client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) getService(ns, name string) *corev1.Service {
	h.t.Helper()
	svc, err := h.client.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return svc
}

func (h *harness) updateService(svc *corev1.Service) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Services(svc.Namespace).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) createNode(node *corev1.Node) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) updateNode(node *corev1.Node) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// waitIngress waits until the Service's status shows the cloud's VIP for it.
func (h *harness) waitIngress(ns, name string) *corev1.Service {
	h.t.Helper()
	var svc *corev1.Service
	poll.Eventually(h.t, "status of "+ns+"/"+name, func() error {
		svc = h.getService(ns, name)
		lb, ok := h.cloud.LoadBalancer(LoadBalancerName(svc))
		if !ok {
			return errors.New("no load balancer in the cloud")
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != lb.VIP.String() {
			return fmt.Errorf("ingress %+v, want VIP %s", ing, lb.VIP)
		}
		return nil
	})
	return svc
}

// waitBackends waits until the load balancer's backends are exactly names, in order.
func (h *harness) waitBackends(lbName string, names ...string) {
	h.t.Helper()
	poll.Eventually(h.t, "backends of "+lbName, func() error {
		lb, ok := h.cloud.LoadBalancer(lbName)
		if !ok {
			return errors.New("no load balancer")
		}
		var got []string
		for _, b := range lb.Spec.Backends {
			got = append(got, b.NodeName)
		}
		if strings.Join(got, ",") != strings.Join(names, ",") {
			return fmt.Errorf("backends %v, want %v", got, names)
		}
		return nil
	})
}

// quiesce waits until the controller has nothing queued or in progress and the cloud has
// no call in flight, then a little more for anything a batch window might still send.
func (h *harness) quiesce() {
	h.t.Helper()
	poll.Eventually(h.t, "controller to go idle", func() error {
		// Idle at 50 samples 20ms apart: ten test batch windows.
		for range 50 {
			if n, inFlight := h.ctrl.worker.Len(), h.cloud.InFlight(); n != 0 || inFlight != 0 {
				return fmt.Errorf("busy: %d queued, %d cloud calls in flight", n, inFlight)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
}

// syncErrors returns how many syncs failed with reason, by the worker's count.
func (h *harness) syncErrors(reason string) float64 {
	h.t.Helper()
	return metrictest.Value(h.t, h.metrics, "nephele_controller_sync_errors_total",
		map[string]string{"controller": manager.ServiceLBController, "reason": reason})
}
