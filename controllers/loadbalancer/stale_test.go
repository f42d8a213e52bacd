package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// The controller's cache (the informers' clientset) and the apiserver (the clientset it
// writes through) disagree, as after a pause or a lagging watch: a Service the cache
// still shows must not get a load balancer unless the apiserver confirms it.
func TestStaleCacheDoesNotCreate(t *testing.T) {
	// Annotated as this controller annotates the Services it holds the finalizer of, so
	// the controller reads the apiserver rather than patching it; the fake clientset
	// does not refuse a patch carrying another UID as the apiserver does.
	cached := newService("ns", "web", withFinalizer(), withAnnotation(ClassAnnotation, ""))
	for _, tc := range []struct {
		name string
		// cache is what the informers list; live what the apiserver has.
		cache, live []runtime.Object
		// refuseFinalizer makes the apiserver answer the finalizer patch as it does on
		// a Service being deleted: 422, no new finalizers.
		refuseFinalizer bool
		wantLB          bool
	}{{
		name:   "agree",
		cache:  []runtime.Object{cached.DeepCopy()},
		live:   []runtime.Object{cached.DeepCopy()},
		wantLB: true,
	}, {
		name:  "deleted",
		cache: []runtime.Object{cached.DeepCopy()},
	}, {
		name:  "deleted before the finalizer went on",
		cache: []runtime.Object{newService("ns", "web")},
	}, {
		name:  "replaced",
		cache: []runtime.Object{cached.DeepCopy()},
		live: []runtime.Object{newService("ns", "web", withFinalizer(), func(s *corev1.Service) {
			s.UID = types.UID("another-uid")
		})},
	}, {
		name:  "being deleted",
		cache: []runtime.Object{cached.DeepCopy()},
		live: []runtime.Object{newService("ns", "web", withFinalizer(), func(s *corev1.Service) {
			s.DeletionTimestamp = deletedAt()
		})},
	}, {
		name:  "being deleted before the finalizer went on",
		cache: []runtime.Object{newService("ns", "web")},
		live: []runtime.Object{newService("ns", "web", func(s *corev1.Service) {
			s.DeletionTimestamp = deletedAt()
			s.Finalizers = []string{"example.com/other"}
		})},
		refuseFinalizer: true,
	}, {
		name:  "no longer a load balancer",
		cache: []runtime.Object{cached.DeepCopy()},
		live:  []runtime.Object{newService("ns", "web", withFinalizer(), withType(corev1.ServiceTypeClusterIP))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			live := fake.NewClientset(tc.live...)
			if tc.refuseFinalizer {
				live.PrependReactor("patch", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "web",
						field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")})
				})
			}
			h := newHarness(t, func(c *Config) { c.Client = live }, append(tc.cache, newNode("n1"))...)
			lbName := LoadBalancerName(cached)
			if tc.wantLB {
				poll.Eventually(t, "load balancer "+lbName, func() error {
					if _, ok := h.cloud.LoadBalancer(lbName); !ok {
						return errors.New("not in the cloud")
					}
					return nil
				})
				h.quiesce()
				if n := testutil.ToFloat64(h.ctrl.metrics.stale.WithLabelValues(staleSkipped)); n != 0 {
					t.Errorf("%v ensures skipped, want 0", n)
				}
				return
			}
			poll.Eventually(t, "the ensure skipped", func() error {
				if n := testutil.ToFloat64(h.ctrl.metrics.stale.WithLabelValues(staleSkipped)); n != 1 {
					return fmt.Errorf("%v ensures skipped", n)
				}
				return nil
			})
			h.quiesce()
			if n := h.cloud.TotalCalls(); n != 0 {
				t.Errorf("%d cloud calls, want 0: %v", n, h.cloud.CallLog())
			}
			if h.ctrl.hasState("ns/web") {
				t.Error("state kept for a Service the apiserver does not confirm")
			}
		})
	}
}

// The Service goes away while its load balancer is being created: the status patch finds
// it gone, and the load balancer just made is deleted at once, although the cache still
// shows the Service.
func TestLoadBalancerOfServiceGoneDuringEnsureIsDeleted(t *testing.T) {
	svc := newService("ns", "web", withFinalizer())
	live := fake.NewClientset(svc.DeepCopy())
	h := newHarness(t, func(c *Config) { c.Client = live }, svc.DeepCopy(), newNode("n1"))
	lbName := LoadBalancerName(svc)
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, subject string) error {
		if op == cloud.OpEnsureLoadBalancer {
			// Another leader's cleanup, or a user with the finalizer removed.
			if err := live.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	poll.Eventually(t, "the load balancer deleted after its ensure", func() error {
		if n := testutil.ToFloat64(h.ctrl.metrics.stale.WithLabelValues(staleDeleted)); n != 1 {
			return fmt.Errorf("%v deleted after ensure", n)
		}
		if _, ok := h.cloud.LoadBalancer(lbName); ok {
			return errors.New("load balancer still in the cloud")
		}
		return nil
	})
	h.quiesce()
	if _, ok := h.cloud.LoadBalancer(lbName); ok {
		t.Error("load balancer recreated")
	}
	if n := h.cloud.Calls(cloud.OpEnsureLoadBalancer); n != 1 {
		t.Errorf("%d ensures, want 1", n)
	}
	if h.ctrl.hasState("ns/web") {
		t.Error("state kept for a deleted Service")
	}
}
