package loadbalancer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// A controller whose cache is a snapshot of the apiserver taken before the apiserver
// moved on (a replica frozen for minutes, or a watch that lagged) writes to the real
// apiserver: it creates a load balancer only for the Service the apiserver confirms, and
// deletes at once the load balancers whose Services went away while they were being
// created.
func TestIntegrationStaleCache(t *testing.T) {
	e := controlPlane(t)
	ctx := t.Context()
	ns := newTestNamespace(t, e)
	const class = "integration.nephele.dev/stale"
	services := e.Client.CoreV1().Services(ns)
	create := func(name string, finalizer bool) *corev1.Service {
		t.Helper()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{
				Type:              corev1.ServiceTypeLoadBalancer,
				LoadBalancerClass: ptr.To(class),
				Ports:             []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			},
		}
		if finalizer {
			// As the leader before this one left it.
			svc.Finalizers = []string{Finalizer}
		}
		out, err := services.Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Service %s: %v", name, err)
		}
		return out
	}
	t.Cleanup(func() {
		// Nothing stays behind with the finalizer, whatever the test did.
		list, err := services.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing Services: %v", err)
			return
		}
		for _, svc := range list.Items {
			if err := removeFinalizerAndDelete(context.Background(), e.Client, &svc); err != nil {
				t.Errorf("cleaning up: %v", err)
			}
		}
	})

	// What the apiserver had when the cache was last up to date.
	snapshot := map[string]*corev1.Service{}
	for _, name := range []string{"kept", "gone", "replaced", "deleting", "gone-during-ensure", "replaced-during-ensure"} {
		snapshot[name] = create(name, true)
	}
	snapshot["gone-before-finalizer"] = create("gone-before-finalizer", false)
	var cached []runtime.Object
	for _, svc := range snapshot {
		cached = append(cached, svc.DeepCopy())
	}

	// The apiserver moves on; the cache does not see it.
	for _, name := range []string{"gone", "replaced", "gone-before-finalizer"} {
		if err := removeFinalizerAndDelete(ctx, e.Client, snapshot[name]); err != nil {
			t.Fatal(err)
		}
	}
	create("replaced", false)
	if err := services.Delete(ctx, "deleting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err) // the finalizer keeps it, with a deletion timestamp
	}

	factory := informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(cached...), 0, informers.WithNamespace(ns))
	h := startRealController(t, e, ns, class, factory, nil)
	// Both go away while their load balancer is being created.
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, lbName string) error {
		if op != cloud.OpEnsureLoadBalancer {
			return nil
		}
		switch lbName {
		case LoadBalancerName(snapshot["gone-during-ensure"]):
			return removeFinalizerAndDelete(ctx, e.Client, snapshot["gone-during-ensure"])
		case LoadBalancerName(snapshot["replaced-during-ensure"]):
			if err := removeFinalizerAndDelete(ctx, e.Client, snapshot["replaced-during-ensure"]); err != nil {
				return err
			}
			_, err := services.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "replaced-during-ensure"},
				Spec:       snapshot["replaced-during-ensure"].Spec,
			}, metav1.CreateOptions{})
			return err
		}
		return nil
	})

	h.waitIngress("kept", wait)
	poll.Within(t, wait, "the stale Services handled", func() error {
		skipped := testutil.ToFloat64(h.ctrl.metrics.stale.WithLabelValues(staleSkipped))
		deleted := testutil.ToFloat64(h.ctrl.metrics.stale.WithLabelValues(staleDeleted))
		if skipped < 4 || deleted < 2 {
			return fmt.Errorf("%v ensures skipped (want 4), %v load balancers deleted after their ensure (want 2)", skipped, deleted)
		}
		return nil
	})
	// A last look once everything has settled: the retries the cache's view may cause
	// must not create anything either. The metric counts a deletion when it starts, and
	// Len counts no key in flight, so the last deletion may still be under way: wait for
	// the cloud to hold only kept's load balancer.
	poll.Within(t, wait, "the controller to go idle with no load balancer left without a Service", func() error {
		if n := h.ctrl.worker.Len(); n != 0 {
			return fmt.Errorf("%d Services queued", n)
		}
		var left []string
		for _, lb := range h.cloud.AllLoadBalancers() {
			if lb.Name != LoadBalancerName(snapshot["kept"]) {
				left = append(left, lb.Name)
			}
		}
		if len(left) != 0 {
			return fmt.Errorf("load balancers without a Service: %v", left)
		}
		return nil
	})
	// kept, and the two whose Services went away during the ensure; nothing else.
	if n := h.cloud.Calls(cloud.OpEnsureLoadBalancer); n != 3 {
		t.Errorf("%d EnsureLoadBalancer calls, want 3: %v", n, h.cloud.CallLog())
	}
	for _, name := range []string{"deleting"} {
		svc, err := services.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("Service %s being deleted got a status: %+v", name, svc.Status.LoadBalancer)
		}
	}
}

// wait bounds each wait of the stale cache test.
const wait = 60 * time.Second

// removeFinalizerAndDelete deletes svc as if its finalizer had been handled: the
// finalizer goes, then the Service. It is a no-op for a Service already gone.
func removeFinalizerAndDelete(ctx context.Context, client kubernetes.Interface, svc *corev1.Service) error {
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"finalizers":null}}`, svc.UID)
	_, err := client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizers of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	uid := svc.UID
	err = client.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}
