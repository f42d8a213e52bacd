package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/internal/testkit/operatortest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// TestTrustedCABundle: the bundle holds the system CA, the user's CAs and the cloud
// config's ca-bundle.pem; a bad user bundle is left out with a condition naming it and
// the fix; fixing it puts it in and rolls the pods.
func TestTrustedCABundle(t *testing.T) {
	system, user, cloud := operatortest.CA(t, "system"), operatortest.CA(t, "user"), operatortest.CA(t, "cloud")
	h := newHarnessWith(t, "ccm-ca", func(c *Config) { c.SystemCABundle = system })
	ctx := t.Context()
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca-cloud", Namespace: h.configNS},
		Data: map[string][]byte{"cloud.conf": []byte("endpoint: https://10.0.0.1\n"), "ca-bundle.pem": cloud}}
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "user-ca", Namespace: h.configNS},
		Data: map[string]string{"ca-bundle.crt": "not PEM"}}
	for _, o := range []client.Object{src, ca} {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.c.Delete(context.Background(), o) })
	}
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
		Spec: v1alpha1.CloudControllerManagerSpec{Platform: "local",
			CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: h.configNS, Name: "ca-cloud"},
			TrustedCA:   &v1alpha1.ConfigSource{Kind: v1alpha1.SourceConfigMap, Namespace: h.configNS, Name: "user-ca"}}}
	if err := h.c.Create(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.deleteCCM)

	c := h.waitCondition(v1alpha1.ConditionTrustedCABundleSynced, metav1.ConditionFalse, ReasonSourceInvalid)
	if !strings.Contains(c.Message, "ConfigMap "+h.configNS+"/user-ca key ca-bundle.crt") || !strings.Contains(c.Message, "fix it") {
		t.Errorf("message %q does not name the ConfigMap and the fix", c.Message)
	}
	bundle := func(want ...[]byte) func() error {
		return func() error {
			var cm corev1.ConfigMap
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: profiles.TrustedCAConfigMap}, &cm); err != nil {
				return err
			}
			got := cm.Data[profiles.TrustedCAKey]
			if n := strings.Count(got, "BEGIN CERTIFICATE"); n != len(want) {
				return fmt.Errorf("%d certificates, want %d", n, len(want))
			}
			for _, w := range want {
				if !strings.Contains(got, string(w)) {
					return fmt.Errorf("bundle lacks a certificate")
				}
			}
			return nil
		}
	}
	poll.Eventually(t, "system and cloud config CAs in the bundle", bundle(system, cloud))
	hash := h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash]

	ca.Data["ca-bundle.crt"] = string(user)
	if err := h.c.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	h.waitCondition(v1alpha1.ConditionTrustedCABundleSynced, metav1.ConditionTrue, ReasonSynced)
	poll.Eventually(t, "all three CAs in the bundle", bundle(system, user, cloud))
	poll.Eventually(t, "pods rolled for the new bundle", func() error {
		if h.deployment().Spec.Template.Annotations[profiles.AnnotationConfigHash] == hash {
			return fmt.Errorf("config hash unchanged")
		}
		return nil
	})
}
