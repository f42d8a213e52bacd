package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/internal/testkit/operatortest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// TestConfusedDeputyRefused tries, on a real control plane, the attacks issue 21 found
// on the operator, whose CloudControllerManager an editor could point at any Secret for
// the operator to copy next to a CCM image the editor chooses: a cloud config Secret and
// a CA ConfigMap in another namespace, a source holding keys beyond the one named, and a
// ClusterRole labelled as the operator's but not owned by the CloudControllerManager,
// which pruning and removal must leave alone. Each is refused, and the legitimate path
// (sources in the config namespace) works before and after, in the same test.
func TestConfusedDeputyRefused(t *testing.T) {
	h := newHarness(t, "ccm-deputy")
	ctx := t.Context()
	cloudCA, userCA, victimCA := operatortest.CA(t, "cloud"), operatortest.CA(t, "user"), operatortest.CA(t, "victim")
	const stolen = "victims-admin-token"
	victimNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ccm-deputy-victim"}}
	if err := h.c.Create(ctx, victimNS); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-credentials", Namespace: victimNS.Name},
		Data: map[string][]byte{"cloud.conf": []byte("endpoint: http://127.0.0.1:9\ntoken: " + stolen + "\n"), "token": []byte(stolen)}}
	victimCAs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim-ca", Namespace: victimNS.Name},
		Data: map[string]string{profiles.TrustedCAKey: string(victimCA)}}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: h.configNS},
		Data: map[string][]byte{"cloud.conf": []byte("endpoint: http://127.0.0.1:1\n"), cloudConfigCAKey: cloudCA,
			"admin-token": []byte("not-for-the-ccm")}}
	userCAs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "user-ca", Namespace: h.configNS},
		Data: map[string]string{profiles.TrustedCAKey: string(userCA), "notes": "not for the ccm"}}
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ccm-deputy-foreign",
		Labels: map[string]string{profiles.LabelManagedBy: profiles.ManagedByValue, LabelComponent: ComponentOperand}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	for _, o := range []client.Object{victim, victimCAs, src, userCAs, foreign} {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.c.Delete(context.Background(), o) })
	}
	legit := func(c *v1alpha1.CloudControllerManager) {
		c.Spec.CloudConfig = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: h.configNS, Name: src.Name}
		c.Spec.TrustedCA = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceConfigMap, Namespace: h.configNS, Name: userCAs.Name}
	}
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
		Spec: v1alpha1.CloudControllerManagerSpec{Platform: "local"}}
	legit(ccm)
	if err := h.c.Create(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.deleteCCM)

	// The legitimate path: only the named key and the cloud's CA are copied.
	h.waitCondition(v1alpha1.ConditionCloudConfigSynced, metav1.ConditionTrue, ReasonSynced)
	h.waitCondition(v1alpha1.ConditionTrustedCABundleSynced, metav1.ConditionTrue, ReasonSynced)
	synced, bundle := h.synced()
	if keys := slices.Sorted(maps.Keys(synced.Data)); !slices.Equal(keys, []string{cloudConfigCAKey, profiles.CloudConfigKey}) {
		t.Errorf("the synced Secret has keys %v: want only %s and %s, not the source's other keys", keys, cloudConfigCAKey, profiles.CloudConfigKey)
	}
	for _, want := range [][]byte{cloudCA, userCA} {
		if !strings.Contains(bundle.Data[profiles.TrustedCAKey], string(want)) {
			t.Error("the CA bundle lacks the cloud's or the user's CA")
		}
	}
	hash := h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash]

	t.Run("a labelled ClusterRole it does not own survives pruning", func(t *testing.T) {
		route := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:controller:cloud-route-controller"}}
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
			t.Fatalf("the route controller's ClusterRole: %v", err)
		}
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.ConfigureCloudRoutes = ptr.To(false) })
		poll.Eventually(t, "the route controller's ClusterRole pruned", func() error {
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(route), route); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
		assertExists(t, h, foreign)
		hash = h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash]
	})

	t.Run("sources in another namespace are refused, nothing copied or deleted", func(t *testing.T) {
		h.update(func(c *v1alpha1.CloudControllerManager) {
			c.Spec.CloudConfig = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: victimNS.Name, Name: victim.Name}
			c.Spec.TrustedCA = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceConfigMap, Namespace: victimNS.Name, Name: victimCAs.Name}
		})
		for typ, field := range map[string]string{v1alpha1.ConditionCloudConfigSynced: "spec.cloudConfig", v1alpha1.ConditionTrustedCABundleSynced: "spec.trustedCA"} {
			c := h.conditionAtGeneration(typ)
			if c.Status != metav1.ConditionFalse || c.Reason != ReasonSourceNotAllowed {
				t.Errorf("%s=%s %s (%s): want False %s", typ, c.Status, c.Reason, c.Message, ReasonSourceNotAllowed)
			}
			for _, want := range []string{field + ".namespace", victimNS.Name, h.configNS, "--config-namespace"} {
				if !strings.Contains(c.Message, want) {
					t.Errorf("%s message %q does not say %q", typ, c.Message, want)
				}
			}
		}
		gotSecret, gotBundle := h.synced()
		if !maps.EqualFunc(gotSecret.Data, synced.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("the synced Secret changed: it holds %q", gotSecret.Data[profiles.CloudConfigKey])
		}
		if strings.Contains(string(gotSecret.Data[profiles.CloudConfigKey]), stolen) {
			t.Error("the victim's Secret was copied into the CCM's namespace")
		}
		if gotBundle.Data[profiles.TrustedCAKey] != bundle.Data[profiles.TrustedCAKey] {
			t.Error("the CA bundle changed")
		}
		c := h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonInvalidSpec)
		if !strings.Contains(c.Message, "spec.cloudConfig.namespace") || !strings.Contains(c.Message, "spec.trustedCA.namespace") {
			t.Errorf("Degraded message %q does not name both fields", c.Message)
		}
		if got := h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash]; got != hash {
			t.Errorf("the Deployment's config hash changed from %s to %s: something was applied", hash, got)
		}
	})

	t.Run("back in the config namespace, synced again", func(t *testing.T) {
		h.update(legit)
		h.waitCondition(v1alpha1.ConditionCloudConfigSynced, metav1.ConditionTrue, ReasonSynced)
		h.waitCondition(v1alpha1.ConditionTrustedCABundleSynced, metav1.ConditionTrue, ReasonSynced)
		h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
	})

	t.Run("deletion leaves the labelled ClusterRole it does not own", func(t *testing.T) {
		h.deleteCCM()
		assertExists(t, h, foreign)
	})
}

// synced returns the sync controllers' Secret and ConfigMap in the CCM's namespace.
func (h *harness) synced() (*corev1.Secret, *corev1.ConfigMap) {
	h.t.Helper()
	var s corev1.Secret
	var cm corev1.ConfigMap
	poll.Eventually(h.t, "the synced Secret and ConfigMap", func() error {
		if err := h.c.Get(h.t.Context(), client.ObjectKey{Namespace: h.ns, Name: profiles.CloudConfigSecret}, &s); err != nil {
			return err
		}
		return h.c.Get(h.t.Context(), client.ObjectKey{Namespace: h.ns, Name: profiles.TrustedCAConfigMap}, &cm)
	})
	return &s, &cm
}

// conditionAtGeneration waits until the condition has been written for the resource's
// current generation and returns it, whatever its status.
func (h *harness) conditionAtGeneration(typ string) *metav1.Condition {
	h.t.Helper()
	var got *metav1.Condition
	poll.Eventually(h.t, typ+" for the current generation", func() error {
		ccm := h.get("get")
		got = findCondition(ccm.Status.Conditions, typ)
		if got == nil || got.ObservedGeneration != ccm.Generation {
			return fmt.Errorf("generation %d, conditions %+v", ccm.Generation, ccm.Status.Conditions)
		}
		return nil
	})
	return got
}

// assertExists checks obj is still there and not being deleted.
func assertExists(t *testing.T, h *harness, obj client.Object) {
	t.Helper()
	if err := h.c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil || obj.GetDeletionTimestamp() != nil {
		t.Errorf("%T %s, labelled as the operator's but not owned by the CloudControllerManager, was deleted: %v %v",
			obj, obj.GetName(), err, obj.GetDeletionTimestamp())
	}
}
