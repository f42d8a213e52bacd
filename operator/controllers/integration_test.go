package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/install"
	"github.com/nephele-dev/nephele/operator/profiles"
	"github.com/nephele-dev/nephele/operator/scheme"
)

// The Deployment controller, the scheduler and kwok make the CCM's pods "run" on kwok
// Nodes, so rollouts complete as on a real cluster.
var shared = testenv.Shared{Options: controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true}}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// harness runs the operator's controllers against the shared control plane, for one
// namespace, with its sources in a config namespace of its own.
type harness struct {
	t        *testing.T
	c        client.Client
	ns       string
	configNS string
}

func newHarness(t *testing.T, ns string) *harness {
	t.Helper()
	return newHarnessWith(t, ns, func(*Config) {})
}

// newHarnessWith is newHarness with the controllers' Config changed by set.
func newHarnessWith(t *testing.T, ns string, set func(*Config)) *harness {
	t.Helper()
	env := shared.Env(t)
	s := scheme.New()
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := install.EnsureCRD(ctx, c, "test"); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Namespace: ns, ConfigNamespace: ns + "-config", Version: "v1", ProgressingRequeue: time.Second, SourceResync: time.Second}
	set(&cfg)
	for _, n := range []string{ns, cfg.ConfigNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: s, Cache: CacheOptions(ns), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Logger: testlog.New(t, 0), Controller: ctrlConfigSkipNameValidation(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &harness{t: t, c: c, ns: ns, configNS: cfg.ConfigNamespace}
}

func (h *harness) get(what string) *v1alpha1.CloudControllerManager {
	var ccm v1alpha1.CloudControllerManager
	if err := h.c.Get(h.t.Context(), singleton, &ccm); err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
	return &ccm
}

// waitCondition waits until the condition has status (and, if set, reason).
func (h *harness) waitCondition(typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	h.t.Helper()
	var got *metav1.Condition
	poll.Eventually(h.t, fmt.Sprintf("%s=%s %s", typ, status, reason), func() error {
		ccm := h.get("get")
		got = findCondition(ccm.Status.Conditions, typ)
		if got == nil || got.Status != status || (reason != "" && got.Reason != reason) || ccm.Status.ObservedGeneration != ccm.Generation {
			return fmt.Errorf("conditions %+v", ccm.Status.Conditions)
		}
		return nil
	})
	return got
}

func (h *harness) deployment() *appsv1.Deployment { return h.deploymentNamed(render.DeploymentName) }

// deploymentNamed waits for the Deployment name in the harness's namespace.
func (h *harness) deploymentNamed(name string) *appsv1.Deployment {
	var d appsv1.Deployment
	poll.Eventually(h.t, "Deployment "+name, func() error {
		return h.c.Get(h.t.Context(), client.ObjectKey{Namespace: h.ns, Name: name}, &d)
	})
	return &d
}

func (h *harness) update(mutate func(*v1alpha1.CloudControllerManager)) {
	h.t.Helper()
	poll.Eventually(h.t, "update the CloudControllerManager", func() error {
		ccm := h.get("get")
		mutate(ccm)
		return h.c.Update(h.t.Context(), ccm)
	})
}

// holdLease plays the elected CCM: a fresh Lease in the namespace.
func (h *harness) holdLease() {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: render.LeaseName, Namespace: h.ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-a_1"), LeaseDurationSeconds: ptr.To(int32(3600)),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if err := h.c.Create(h.t.Context(), l); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
}

func (h *harness) owned(component string) []*unstructured.Unstructured {
	objs, err := listLabelled(context.Background(), h.c, component, (Config{Namespace: h.ns}).namespaces())
	if err != nil {
		h.t.Fatal(err)
	}
	// The controllers' shared accounts in kube-system outlive every CCM (sharedAccount).
	return slices.DeleteFunc(objs, sharedAccount)
}

// deleteCCM deletes the CloudControllerManager and waits until it is gone.
func (h *harness) deleteCCM() {
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName}}
	if err := h.c.Delete(context.Background(), ccm); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	// Cleanups run after t.Context is canceled, so this waits on a context of its own.
	err := poll.Until(context.Background(), poll.Timeout, func(ctx context.Context) error {
		if err := h.c.Get(ctx, singleton, ccm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v), finalizers %v", err, ccm.Finalizers)
		}
		return nil
	})
	if err != nil {
		h.t.Errorf("CloudControllerManager not deleted: %v", err)
	}
}

func kwokNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		Labels:      map[string]string{"kubernetes.io/hostname": name}}}
}

// TestOperandLifecycle drives one CloudControllerManager through install, config change,
// deletion of its Deployment, upgrade, downgrade, a pruned object, Removed, Managed again
// and deletion, checking Nodes and a LoadBalancer Service are never touched.
func TestOperandLifecycle(t *testing.T) {
	h := newHarness(t, "ccm-lifecycle")
	ctx := t.Context()
	if err := h.c.Create(ctx, kwokNode("op-node-1")); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := h.c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), lb) })
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-cloud", Namespace: h.configNS},
		Data: map[string][]byte{"cloud.conf": []byte("endpoint: http://127.0.0.1:1\n")}}
	if err := h.c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), src) })

	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
		Spec: v1alpha1.CloudControllerManagerSpec{Platform: "local",
			CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: h.configNS, Name: "local-cloud"}}}
	if err := h.c.Create(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.deleteCCM)

	h.waitCondition(v1alpha1.ConditionCloudConfigSynced, metav1.ConditionTrue, ReasonSynced)
	h.waitCondition(v1alpha1.ConditionTrustedCABundleSynced, metav1.ConditionTrue, ReasonSynced)
	var synced corev1.Secret
	poll.Eventually(t, "synced cloud config", func() error {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: profiles.CloudConfigSecret}, &synced); err != nil {
			return err
		}
		if got := string(synced.Data[profiles.CloudConfigKey]); !strings.Contains(got, "requestTimeout: 10s") {
			return fmt.Errorf("cloud.conf %q lacks the profile's default", got)
		}
		return nil
	})

	// One node: one replica.
	d := h.deployment()
	if r := ptrOr(d.Spec.Replicas, 0); r != 1 {
		t.Errorf("replicas on a one-node cluster = %d, want 1", r)
	}
	hash := d.Spec.Template.Annotations[profiles.AnnotationConfigHash]
	if hash == "" {
		t.Fatal("the pod template has no config hash")
	}
	h.waitCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonNoLeader)
	h.holdLease()
	h.waitCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonAsExpected)
	h.waitCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, "")
	h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
	h.waitCondition(v1alpha1.ConditionUpgradeable, metav1.ConditionTrue, "")
	got := h.get("status")
	if len(got.Status.Versions) != 1 || got.Status.Versions[0].Version != "v1" {
		t.Errorf("versions = %+v, want cloud-controller-manager at v1", got.Status.Versions)
	}
	if len(got.Status.Resources) < 10 {
		t.Errorf("status.resources has %d objects: %+v", len(got.Status.Resources), got.Status.Resources)
	}

	t.Run("config change rolls the pods", func(t *testing.T) {
		src.Data["cloud.conf"] = []byte("endpoint: http://127.0.0.1:2\n")
		if err := h.c.Update(ctx, src); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "a new config hash", func() error {
			d := h.deployment()
			if d.Spec.Template.Annotations[profiles.AnnotationConfigHash] == hash {
				return errors.New("hash unchanged")
			}
			return nil
		})
	})

	t.Run("deleted Deployment is recreated", func(t *testing.T) {
		old := h.deployment()
		if err := h.c.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "the Deployment recreated", func() error {
			d := h.deployment()
			if d.UID == old.UID {
				return errors.New("same UID")
			}
			return nil
		})
	})

	t.Run("upgrade and downgrade", func(t *testing.T) {
		for _, v := range []string{"v2", "v1"} {
			h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.Version = v })
			want := "nephele.local/cloud-controller-manager:" + v
			poll.Eventually(t, "image "+want, func() error {
				if img := h.deployment().Spec.Template.Spec.Containers[0].Image; img != want {
					return fmt.Errorf("image %s", img)
				}
				ccm := h.get("versions")
				if len(ccm.Status.Versions) != 1 || ccm.Status.Versions[0].Image != want {
					return fmt.Errorf("versions %+v", ccm.Status.Versions)
				}
				return nil
			})
		}
	})

	t.Run("two nodes: two replicas", func(t *testing.T) {
		if err := h.c.Create(ctx, kwokNode("op-node-2")); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.ExtraArgs = []string{"--v=2"} })
		poll.Eventually(t, "two replicas", func() error {
			if r := ptrOr(h.deployment().Spec.Replicas, 0); r != 2 {
				return fmt.Errorf("replicas %d", r)
			}
			return nil
		})
	})

	t.Run("prune", func(t *testing.T) {
		route := &unstructured.Unstructured{}
		route.SetAPIVersion("rbac.authorization.k8s.io/v1")
		route.SetKind("ClusterRole")
		route.SetName("system:controller:cloud-route-controller")
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
			t.Fatalf("the route controller's ClusterRole: %v", err)
		}
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.ConfigureCloudRoutes = ptr.To(false) })
		poll.Eventually(t, "route ClusterRole pruned", func() error {
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(route), route); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
	})

	t.Run("Removed, then Managed", func(t *testing.T) {
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.ManagementState = v1alpha1.Removed })
		h.waitCondition(v1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonRemoved)
		h.waitCondition(v1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonRemoved)
		for _, comp := range []string{ComponentOperand, ComponentSync} {
			poll.Eventually(t, comp+" objects gone", func() error {
				var names []string
				for _, u := range h.owned(comp) {
					if u.GetDeletionTimestamp() == nil {
						names = append(names, refString(ref(u)))
					}
				}
				if len(names) > 0 {
					return fmt.Errorf("left: %v", names)
				}
				return nil
			})
		}
		assertUntouched(t, h, lb)
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.ManagementState = v1alpha1.Managed })
		h.deployment()
		h.waitCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonAsExpected)
	})

	t.Run("delete the CR", func(t *testing.T) {
		h.deleteCCM()
		if n := len(h.owned(ComponentOperand)) + len(h.owned(ComponentSync)); n != 0 {
			for _, u := range append(h.owned(ComponentOperand), h.owned(ComponentSync)...) {
				if u.GetDeletionTimestamp() == nil {
					t.Errorf("left behind: %s", refString(ref(u)))
				}
			}
		}
		assertUntouched(t, h, lb)
	})
}

// assertUntouched checks the Nodes and the LoadBalancer Service are still there.
func assertUntouched(t *testing.T, h *harness, lb *corev1.Service) {
	t.Helper()
	var nodes corev1.NodeList
	if err := h.c.List(t.Context(), &nodes); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil {
			names = append(names, n.Name)
		}
	}
	if !slices.Contains(names, "op-node-1") {
		t.Errorf("nodes after removal: %v", names)
	}
	// kube-controller-manager's node-lifecycle-controller runs as this account too.
	var sa corev1.ServiceAccount
	if err := h.c.Get(t.Context(), client.ObjectKey{Namespace: "kube-system", Name: "node-controller"}, &sa); err != nil || sa.DeletionTimestamp != nil {
		t.Errorf("ServiceAccount kube-system/node-controller after removal: %v %v", err, sa.DeletionTimestamp)
	}
	var svc corev1.Service
	if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(lb), &svc); err != nil || svc.DeletionTimestamp != nil {
		t.Errorf("the LoadBalancer Service after removal: %v %v", err, svc.DeletionTimestamp)
	}
}

// TestDegradedNothingApplied: a missing cloud config Secret and an unknown platform are
// Degraded at once with a message naming the object and the fix, and nothing of the CCM
// is applied; creating the Secret heals it.
func TestDegradedNothingApplied(t *testing.T) {
	h := newHarness(t, "ccm-degraded")
	ctx := t.Context()
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
		Spec: v1alpha1.CloudControllerManagerSpec{Platform: "nosuch"}}
	if err := h.c.Create(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.deleteCCM)
	c := h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonUnknownPlatform)
	if !strings.Contains(c.Message, `"nosuch"`) || !strings.Contains(c.Message, "generic, generic-node-manager, local") {
		t.Errorf("message %q does not name the platform and the known ones", c.Message)
	}
	h.waitCondition(v1alpha1.ConditionUpgradeable, metav1.ConditionFalse, ReasonUnknownPlatform)
	if objs := h.owned(ComponentOperand); len(objs) != 0 {
		t.Errorf("%d objects applied for an unknown platform", len(objs))
	}

	h.update(func(c *v1alpha1.CloudControllerManager) {
		c.Spec.Platform = "local"
		c.Spec.CloudConfig = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: h.configNS, Name: "missing-cloud"}
	})
	c = h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonCloudConfigFailed)
	if !strings.Contains(c.Message, "Secret "+h.configNS+"/missing-cloud") || !strings.Contains(c.Message, "create it") {
		t.Errorf("message %q does not name the Secret and the fix", c.Message)
	}
	h.waitCondition(v1alpha1.ConditionCloudConfigSynced, metav1.ConditionFalse, ReasonSourceNotFound)
	if objs := h.owned(ComponentOperand); len(objs) != 0 {
		t.Errorf("%d objects applied with a missing cloud config", len(objs))
	}

	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "missing-cloud", Namespace: h.configNS},
		Data: map[string][]byte{"cloud.conf": []byte("endpoint: http://127.0.0.1:1\n")}}
	if err := h.c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.c.Delete(context.Background(), src) })
	h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
	h.deployment()
}

// TestRecreateOnSelectorChange: a Deployment whose selector differs from the rendering's
// is deleted and created anew.
func TestRecreateOnSelectorChange(t *testing.T) {
	h := newHarness(t, "ccm-selector")
	ctx := t.Context()
	mk := func(app string) *unstructured.Unstructured {
		d := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "sel", Namespace: h.ns},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:1"}}},
				},
			},
		}
		m, err := toUnstructuredMap(d)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := applyObject(ctx, h.c, mk("a")); err != nil {
		t.Fatal(err)
	}
	var first appsv1.Deployment
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "sel"}, &first); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "recreated with selector b", func() error {
		if _, err := applyObject(ctx, h.c, mk("b")); err != nil {
			return err
		}
		var d appsv1.Deployment
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "sel"}, &d); err != nil {
			return err
		}
		if d.UID == first.UID || d.Spec.Selector.MatchLabels["app"] != "b" {
			return fmt.Errorf("uid %s selector %v", d.UID, d.Spec.Selector.MatchLabels)
		}
		return nil
	})
}

// ctrlConfigSkipNameValidation lets each test start a manager with the same
// controller names in one process.
func ctrlConfigSkipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

func toUnstructuredMap(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}
