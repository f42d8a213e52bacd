package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// TestVolumes drives spec.volumes: the CSI driver's objects applied and owned, its own
// cloud config copied (never the CCM's), Available only with the driver's controller
// available, a change to the driver's config rolling the driver and not the CCM, a
// source outside the config namespace refused, and unsetting spec.volumes removing the
// driver and its Secret while the CCM stays.
func TestVolumes(t *testing.T) {
	h := newHarness(t, "ccm-volumes")
	ctx := t.Context()
	if err := h.c.Create(ctx, kwokNode("op-vol-node-1")); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ccmSrc := h.source("local-cloud", "endpoint: http://127.0.0.1:1\ntoken: ccm-token\n")
	csiSrc := h.source("local-cloud-csi", "endpoint: http://127.0.0.1:1\ntoken: csi-token\n")
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
		Spec: v1alpha1.CloudControllerManagerSpec{Platform: "local",
			CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: h.configNS, Name: ccmSrc.Name},
			Volumes: &v1alpha1.Volumes{
				CloudConfig: v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: h.configNS, Name: csiSrc.Name},
				DeviceDirs:  []string{"/var/lib/cloud/hosts"},
			}}}
	if err := h.c.Create(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.deleteCCM)

	h.waitCondition(v1alpha1.ConditionCloudConfigSynced, metav1.ConditionTrue, ReasonSynced)
	poll.Eventually(t, "the CSI driver's cloud config", func() error {
		var s corev1.Secret
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: render.CSICloudConfigSecret}, &s); err != nil {
			return err
		}
		got := string(s.Data[render.CSICloudConfigKey])
		if !strings.Contains(got, "csi-token") || strings.Contains(got, "ccm-token") || !strings.Contains(got, "requestTimeout: 10s") {
			return fmt.Errorf("%s = %q: want the CSI source transformed by the profile", render.CSICloudConfigKey, got)
		}
		return nil
	})
	for _, obj := range []client.Object{
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: render.CSIDriverName}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: render.CSIStorageClass}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: render.CSIControllerName, Namespace: h.ns}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: render.CSINodeName, Namespace: h.ns}},
	} {
		poll.Eventually(t, fmt.Sprintf("%T %s owned by the CloudControllerManager", obj, obj.GetName()), func() error {
			if err := h.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if !metav1.IsControlledBy(obj, h.get("owner")) {
				return fmt.Errorf("owners %+v", obj.GetOwnerReferences())
			}
			return nil
		})
	}

	h.holdLease()
	h.waitCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonAsExpected)
	h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
	// Versions are written once every rollout is complete.
	poll.Eventually(t, "the CSI driver's version", func() error {
		if v := h.get("versions").Status.Versions; len(v) != 2 || v[1].Name != render.CSIControllerName ||
			v[1].Image != "nephele.local/csi-driver:v1" || v[1].Version != "v1" {
			return fmt.Errorf("versions = %+v, want the CCM's and the CSI driver's at v1", v)
		}
		return nil
	})

	t.Run("the driver's config rolls the driver, not the CCM", func(t *testing.T) {
		ccmHash := h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash]
		csiHash := h.deploymentNamed(render.CSIControllerName).Spec.Template.Annotations[profiles.AnnotationConfigHash]
		csiSrc.Data["cloud.conf"] = []byte("endpoint: http://127.0.0.1:2\ntoken: csi-token\n")
		if err := h.c.Update(ctx, csiSrc); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "a new config hash on the CSI driver's pods", func() error {
			if h.deploymentNamed(render.CSIControllerName).Spec.Template.Annotations[profiles.AnnotationConfigHash] == csiHash {
				return errors.New("hash unchanged")
			}
			return nil
		})
		if got := h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash]; got != ccmHash {
			t.Errorf("the CCM's config hash changed (%s → %s) with the CSI driver's config", ccmHash, got)
		}
	})

	t.Run("a source outside the config namespace is refused", func(t *testing.T) {
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.Volumes.CloudConfig.Namespace = "kube-system" })
		c := h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonInvalidSpec)
		if !strings.Contains(c.Message, "spec.volumes.cloudConfig.namespace") {
			t.Errorf("Degraded says %q; want it to name spec.volumes.cloudConfig.namespace", c.Message)
		}
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.Volumes.CloudConfig.Namespace = h.configNS })
		h.waitCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
	})

	t.Run("unset removes the driver and keeps the CCM", func(t *testing.T) {
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.Volumes = nil })
		for _, obj := range []client.Object{
			&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: render.CSIDriverName}},
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: render.CSIStorageClass}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: render.CSIControllerName, Namespace: h.ns}},
			&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: render.CSINodeName, Namespace: h.ns}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: render.CSICloudConfigSecret, Namespace: h.ns}},
		} {
			poll.Eventually(t, fmt.Sprintf("%T %s deleted", obj, obj.GetName()), func() error {
				err := h.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%v)", err)
			})
		}
		h.waitCondition(v1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonAsExpected)
		poll.Eventually(t, "the CCM's version alone", func() error {
			if v := h.get("versions").Status.Versions; len(v) != 1 {
				return fmt.Errorf("versions = %+v, want the CCM's alone", v)
			}
			return nil
		})
	})

	// A driver installed by hand (nephele manifests csi) reads a Secret of the name the
	// sync writes; without spec.volumes the operator must leave it alone.
	t.Run("a hand-made driver's Secret is left alone", func(t *testing.T) {
		mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: render.CSICloudConfigSecret, Namespace: h.ns},
			Data: map[string][]byte{render.CSICloudConfigKey: []byte("endpoint: http://127.0.0.1:3\n")}}
		if err := h.c.Create(ctx, mine); err != nil {
			t.Fatal(err)
		}
		h.update(func(c *v1alpha1.CloudControllerManager) { c.Spec.ExtraArgs = []string{"--v=3"} })
		h.conditionAtGeneration(v1alpha1.ConditionCloudConfigSynced)
		assertExists(t, h, mine)
	})
}

// source creates a Secret in the config namespace holding cloud.conf.
func (h *harness) source(name, conf string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.configNS}, Data: map[string][]byte{"cloud.conf": []byte(conf)}}
	if err := h.c.Create(h.t.Context(), s); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.c.Delete(context.Background(), s) })
	return s
}
