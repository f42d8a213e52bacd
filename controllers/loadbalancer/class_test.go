package loadbalancer

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// TestTwoClassesSideBySide runs two managers with different load balancer classes, each
// with its own cloud, on one cluster: neither may touch the other's Services, whose
// finalizer is the same shared one (KEP-1959 asks every implementation to use it).
func TestTwoClassesSideBySide(t *testing.T) {
	const classA, classB = "a.example.com/lb", "b.example.com/lb"
	a := newHarness(t, func(c *Config) { c.LoadBalancerClass = classA }, newNode("n1"))
	b := startHarness(t, a.client, func(c *Config) { c.LoadBalancerClass = classB })
	a.waitIngress("ns", a.createService(newService("ns", "sa", withClass(classA))).Name)
	b.waitIngress("ns", b.createService(newService("ns", "sb", withClass(classB))).Name)
	a.quiesce()
	b.quiesce()
	for _, side := range []struct {
		h          *harness
		own, other string
	}{{a, "sa", "sb"}, {b, "sb", "sa"}} {
		own := side.h.getService("ns", side.own)
		lb, ok := side.h.cloud.LoadBalancer(LoadBalancerName(own))
		switch {
		case !ok:
			t.Errorf("no load balancer for ns/%s in its own cloud", side.own)
		case !hasFinalizer(own):
			t.Errorf("ns/%s lost its finalizer: %v", side.own, own.Finalizers)
		case len(own.Status.LoadBalancer.Ingress) != 1 || own.Status.LoadBalancer.Ingress[0].IP != lb.VIP.String():
			t.Errorf("ns/%s has status %+v, want the VIP %s of its own cloud", side.own, own.Status.LoadBalancer, lb.VIP)
		}
		if n := len(side.h.cloud.AllLoadBalancers()); n != 1 {
			t.Errorf("the cloud of ns/%s holds %d load balancers, want 1", side.own, n)
		}
		if n := side.h.cloud.Calls(cloud.OpEnsureLoadBalancerDeleted); n != 0 {
			t.Errorf("the manager of ns/%s called EnsureLoadBalancerDeleted %d times (for ns/%s?)", side.own, n, side.other)
		}
	}
}

// TestClassOwnership starts a controller on Services some other implementation may own,
// as after a restart (no record in memory): it acts only where the class, or its own
// annotation, says that it holds state.
func TestClassOwnership(t *testing.T) {
	const ours, theirs = "ours.example.com/lb", "theirs.example.com/lb"
	withStatus := func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}
	}
	beingDeleted := func(s *corev1.Service) { s.DeletionTimestamp = deletedAt() }
	annotated := func(class string) svcOpt { return withAnnotation(ClassAnnotation, class) }
	clusterIP := withType(corev1.ServiceTypeClusterIP)
	type state struct{ inCloud, finalizer, status, annotation bool }
	tests := []struct {
		name  string
		class string // the controller's --load-balancer-class
		svc   *corev1.Service
		// before is whether the cloud has a load balancer for svc when the controller
		// starts; the Service's side of before is svc as given.
		inCloud bool
		want    state
		// acts is whether the controller may call the cloud for svc at all.
		acts bool
	}{
		{
			name: "another class's LoadBalancer", class: ours,
			svc:  newService("ns", "web", withClass(theirs), withFinalizer(), withStatus),
			want: state{finalizer: true, status: true},
		},
		{
			name: "another class's LoadBalancer being deleted", class: ours,
			svc:  newService("ns", "web", withClass(theirs), withFinalizer(), withStatus, beingDeleted),
			want: state{finalizer: true, status: true},
		},
		{
			name: "a class's LoadBalancer being deleted, seen by the default controller", class: "",
			svc:  newService("ns", "web", withClass(theirs), withFinalizer(), withStatus, beingDeleted),
			want: state{finalizer: true, status: true},
		},
		{
			name: "another nephele class's Service that left LoadBalancer", class: "",
			svc:  newService("ns", "web", clusterIP, withFinalizer(), withStatus, annotated(theirs)),
			want: state{finalizer: true, status: true, annotation: true},
		},
		{
			name: "a Service that left LoadBalancer, no record, seen by a class controller", class: ours,
			svc:  newService("ns", "web", clusterIP, withFinalizer(), withStatus),
			want: state{finalizer: true, status: true},
		},
		{
			name: "our class's Service that left LoadBalancer while we were down", class: ours,
			svc:     newService("ns", "web", clusterIP, withFinalizer(), withStatus, annotated(ours)),
			inCloud: true, acts: true,
			want: state{},
		},
		{
			name: "a Service from before the annotation that left LoadBalancer, default controller", class: "",
			svc:     newService("ns", "web", clusterIP, withFinalizer(), withStatus),
			inCloud: true, acts: true,
			want: state{},
		},
		{
			// LoadBalancer -> ClusterIP -> LoadBalancer of another class while we were
			// down: our load balancer goes, the finalizer and status are the new class's.
			name: "our Service moved to another class behind our back", class: ours,
			svc:     newService("ns", "web", withClass(theirs), withFinalizer(), withStatus, annotated(ours)),
			inCloud: true, acts: true,
			want: state{finalizer: true, status: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.LoadBalancerClass = tt.class
				if tt.inCloud {
					if _, err := c.LoadBalancers.(*fakecloud.Cloud).AddLoadBalancer(cloud.LoadBalancerSpec{Name: LoadBalancerName(tt.svc)}); err != nil {
						t.Fatal(err)
					}
				}
			}, newNode("n1"), tt.svc)
			check := func() error {
				svc := h.getService("ns", "web")
				_, inCloud := h.cloud.LoadBalancer(LoadBalancerName(svc))
				_, annotation := svc.Annotations[ClassAnnotation]
				got := state{inCloud: inCloud, finalizer: hasFinalizer(svc), status: len(svc.Status.LoadBalancer.Ingress) > 0, annotation: annotation}
				if got != tt.want {
					return fmt.Errorf("load balancer in the cloud, finalizer, status, annotation = %+v, want %+v", got, tt.want)
				}
				return nil
			}
			poll.Eventually(t, "the Service and the cloud as wanted", check)
			h.quiesce()
			if err := check(); err != nil {
				t.Fatal(err)
			}
			if n := h.cloud.TotalCalls(); !tt.acts && n != 0 {
				t.Errorf("%d cloud calls for a Service that is not this controller's: %v", n, h.cloud.CallLog())
			}
			if h.ctrl.hasState("ns/web") {
				t.Error(errors.New("state kept for ns/web"))
			}
		})
	}
}
