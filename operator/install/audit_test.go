package install

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/internal/testkit/operatortest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/controllers"
	"github.com/nephele-dev/nephele/operator/profiles"
	"github.com/nephele-dev/nephele/operator/scheme"
)

// TestRBACAudit installs the operator's RBAC as its manifests have it and runs the
// controllers as the operator's ServiceAccount (impersonated) through install, a cloud
// config, trusted CA and CSI driver's cloud config from another namespace (spec.volumes:
// the driver applied too), Removed, and deletion, with the CCM in
// kube-system and in a namespace of its own. Any transient error is Degraded at once
// (DegradedAfter 1ns), so a Forbidden shows as Degraded.
func TestRBACAudit(t *testing.T) {
	for _, ns := range []string{render.DefaultNamespace, "nephele-audit-ccm"} {
		t.Run("operand in "+ns, func(t *testing.T) { auditOperator(t, ns) })
	}
}

func auditOperator(t *testing.T, operandNS string) {
	admin := newClient(t)
	env := shared.Env(t)
	ctx := t.Context()
	opts := DefaultOptions()
	opts.OperandNamespace = operandNS
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operandNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The operator's Deployment is applied too; with no kubelet it never runs, and the
	// controllers below play it.
	if err := Install(ctx, admin, opts, "audit"); err != nil {
		t.Fatal(err)
	}
	// The namespaced Roles go with the case: the next one must not inherit them.
	t.Cleanup(func() {
		for _, o := range []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: operandNS}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: render.ControllerServiceAccountNamespace}},
		} {
			if err := admin.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
	})
	operator := fmt.Sprintf("system:serviceaccount:%s:%s", DefaultNamespace, Name)
	if operandNS != render.ControllerServiceAccountNamespace {
		// With the CCM elsewhere, kube-system holds only the controllers' accounts and
		// their Role for the operator: none of its Secrets or ConfigMaps.
		for _, r := range []authorizationv1.ResourceAttributes{
			{Namespace: "kube-system", Verb: "list", Resource: "secrets"},
			{Namespace: "kube-system", Verb: "get", Resource: "secrets", Name: "any"},
			{Namespace: "kube-system", Verb: "delete", Resource: "secrets", Name: "any"},
			{Namespace: "kube-system", Verb: "watch", Resource: "configmaps"},
			{Namespace: "kube-system", Verb: "patch", Resource: "deployments", Group: "apps", Name: "any"},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: operator,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + DefaultNamespace, "system:authenticated"}, ResourceAttributes: &r}}
			if err := admin.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed {
				t.Errorf("the operator may %s %s in kube-system with the CCM in %s", r.Verb, r.Resource, operandNS)
			}
		}
	}
	as := rest.CopyConfig(env.Config)
	as.Impersonate = rest.ImpersonationConfig{
		UserName: operator,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + DefaultNamespace, "system:authenticated"},
	}
	s := scheme.New()
	mgr, err := ctrl.NewManager(as, ctrl.Options{
		Scheme: s, Cache: controllers.CacheOptions(operandNS), Logger: testlog.New(t, 0),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: Name, LeaderElectionNamespace: DefaultNamespace, LeaderElectionReleaseOnCancel: true,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.Setup(mgr, controllers.Config{Namespace: operandNS, ConfigNamespace: DefaultConfigNamespace, Version: "v1",
		DegradedAfter: time.Nanosecond, SourceResync: time.Second, ProgressingRequeue: time.Second,
		SystemCABundle: operatortest.CA(t, "test CA")}); err != nil {
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

	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DefaultConfigNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: DefaultConfigNamespace},
			Data: map[string][]byte{"cloud.conf": []byte("endpoint: http://127.0.0.1:1\n")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "csi", Namespace: DefaultConfigNamespace},
			Data: map[string][]byte{"cloud.conf": []byte("endpoint: http://127.0.0.1:1\n")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: DefaultConfigNamespace},
			Data: map[string]string{"ca-bundle.crt": string(operatortest.CA(t, "test CA"))}},
	} {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName}}
	if err := ApplyCloudControllerManager(ctx, admin, v1alpha1.CloudControllerManagerSpec{Platform: "local",
		CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: DefaultConfigNamespace, Name: "cloud"},
		TrustedCA:   &v1alpha1.ConfigSource{Kind: v1alpha1.SourceConfigMap, Namespace: DefaultConfigNamespace, Name: "ca"},
		Volumes:     &v1alpha1.Volumes{CloudConfig: v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: DefaultConfigNamespace, Name: "csi"}}}); err != nil {
		t.Fatal(err)
	}
	wantConditions := func(want map[string]metav1.ConditionStatus) func() error {
		return func() error {
			var got v1alpha1.CloudControllerManager
			if err := admin.Get(ctx, client.ObjectKeyFromObject(ccm), &got); err != nil {
				return err
			}
			for typ, status := range want {
				found := false
				for _, c := range got.Status.Conditions {
					if c.Type == typ {
						found = true
						if c.Status != status {
							return fmt.Errorf("%s=%s (%s: %s)", typ, c.Status, c.Reason, c.Message)
						}
					}
				}
				if !found {
					return fmt.Errorf("no %s in %+v", typ, got.Status.Conditions)
				}
			}
			return nil
		}
	}
	poll.Eventually(t, "synced and applied as the operator", wantConditions(map[string]metav1.ConditionStatus{
		v1alpha1.ConditionCloudConfigSynced: metav1.ConditionTrue, v1alpha1.ConditionTrustedCABundleSynced: metav1.ConditionTrue,
		v1alpha1.ConditionDegraded: metav1.ConditionFalse, v1alpha1.ConditionProgressing: metav1.ConditionTrue,
	}))
	csiObjects := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operandNS, Name: render.DeploymentName}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operandNS, Name: render.CSIControllerName}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: operandNS, Name: render.CSINodeName}},
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: render.CSIDriverName}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: render.CSIStorageClass}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operandNS, Name: render.CSICloudConfigSecret}},
	}
	for _, o := range csiObjects {
		poll.Eventually(t, fmt.Sprintf("%T %s applied as the operator", o, o.GetName()), func() error {
			return admin.Get(ctx, client.ObjectKeyFromObject(o), o)
		})
	}
	var bundle corev1.ConfigMap
	if err := admin.Get(ctx, client.ObjectKey{Namespace: operandNS, Name: profiles.TrustedCAConfigMap}, &bundle); err != nil {
		t.Fatal(err)
	}
	if got := len(bundle.Data[profiles.TrustedCAKey]); got < 2*len(operatortest.CA(t, "test CA"))-10 {
		t.Errorf("the bundle has %d bytes: want the system and the user CA", got)
	}

	if err := ApplyCloudControllerManager(ctx, admin, v1alpha1.CloudControllerManagerSpec{Platform: "local",
		ManagementState: v1alpha1.Removed}); err != nil {
		t.Fatal(err)
	}
	for _, o := range csiObjects {
		poll.Eventually(t, fmt.Sprintf("%T %s deleted as the operator", o, o.GetName()), func() error {
			err := admin.Get(ctx, client.ObjectKeyFromObject(o), o)
			if apierrors.IsNotFound(err) || (err == nil && o.GetDeletionTimestamp() != nil) {
				return nil
			}
			return fmt.Errorf("still there: %v", err)
		})
	}
	poll.Eventually(t, "not Degraded after removal", wantConditions(map[string]metav1.ConditionStatus{
		v1alpha1.ConditionDegraded: metav1.ConditionFalse, v1alpha1.ConditionAvailable: metav1.ConditionFalse,
	}))
	if err := admin.Delete(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the CloudControllerManager deleted by its finalizer", func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ccm), ccm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}
