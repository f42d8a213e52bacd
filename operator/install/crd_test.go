package install

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/scheme"
)

var shared = testenv.Shared{}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// newClient starts (or reuses) the control plane and installs the CRD.
func newClient(t *testing.T) client.Client {
	t.Helper()
	env := shared.Env(t)
	c, err := client.New(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := EnsureCRD(ctx, c, "crd-test"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCRDValidation creates one invalid CloudControllerManager per case and checks the API
// server refuses it with exactly one cause whose message says what is wrong.
func TestCRDValidation(t *testing.T) {
	c := newClient(t)
	valid := func() v1alpha1.CloudControllerManager {
		return v1alpha1.CloudControllerManager{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
			Spec:       v1alpha1.CloudControllerManagerSpec{Platform: "local"},
		}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.CloudControllerManager)
		want   string
	}{
		{"not the singleton", func(o *v1alpha1.CloudControllerManager) { o.Name = "other" }, "named cluster"},
		{"no platform", func(o *v1alpha1.CloudControllerManager) { o.Spec.Platform = "" }, "spec.platform"},
		{"platform not a name", func(o *v1alpha1.CloudControllerManager) { o.Spec.Platform = "Local_1" }, "spec.platform"},
		{"unknown management state", func(o *v1alpha1.CloudControllerManager) { o.Spec.ManagementState = "Paused" }, `"Managed", "Unmanaged", "Removed"`},
		{"image and version", func(o *v1alpha1.CloudControllerManager) { o.Spec.Image = "x/y:1"; o.Spec.Version = "1" }, "set image or version, not both"},
		{"image with a space", func(o *v1alpha1.CloudControllerManager) { o.Spec.Image = "x/y :1" }, "no spaces"},
		{"version not a tag", func(o *v1alpha1.CloudControllerManager) { o.Spec.Version = "v1/2" }, "spec.version"},
		{"zero replicas", func(o *v1alpha1.CloudControllerManager) { o.Spec.Replicas = ptr.To(int32(0)) }, "spec.replicas"},
		{"six replicas", func(o *v1alpha1.CloudControllerManager) { o.Spec.Replicas = ptr.To(int32(6)) }, "spec.replicas"},
		{"bad controller", func(o *v1alpha1.CloudControllerManager) { o.Spec.Controllers = []string{"Route!"} }, "spec.controllers[0]"},
		{"bad cluster CIDR", func(o *v1alpha1.CloudControllerManager) { o.Spec.ClusterCIDR = "10.0.0.0/33" }, "want one CIDR or two"},
		{"extra arg without value", func(o *v1alpha1.CloudControllerManager) { o.Spec.ExtraArgs = []string{"--v"} }, "spec.extraArgs[0]"},
		{"feature gates in extra args", func(o *v1alpha1.CloudControllerManager) {
			o.Spec.FeatureGates = map[string]bool{"A": true}
			o.Spec.ExtraArgs = []string{"--feature-gates=B=true"}
		}, "feature gates go in featureGates"},
		{"feature gate name", func(o *v1alpha1.CloudControllerManager) { o.Spec.FeatureGates = map[string]bool{"not-camel": true} }, "CamelCase"},
		{"cloud config kind", func(o *v1alpha1.CloudControllerManager) {
			o.Spec.CloudConfig = &v1alpha1.ConfigSource{Kind: "Pod", Namespace: "kube-system", Name: "x"}
		}, "spec.cloudConfig.kind"},
		{"cloud config without namespace", func(o *v1alpha1.CloudControllerManager) {
			o.Spec.CloudConfig = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Name: "x"}
		}, "spec.cloudConfig.namespace"},
		{"trusted CA key", func(o *v1alpha1.CloudControllerManager) {
			o.Spec.TrustedCA = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceConfigMap, Namespace: "a", Name: "b", Key: "a/b"}
		}, "spec.trustedCA.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mutate(&o)
			err := c.Create(t.Context(), &o)
			if err == nil {
				_ = c.Delete(context.Background(), &o)
				t.Fatalf("created; want refused with %q", tt.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v; want Invalid", err)
			}
			status, _ := err.(apierrors.APIStatus)
			// The API server adds a note when an enum or pattern error kept CEL rules
			// from running; it is not a second error.
			var causes []metav1.StatusCause
			for _, c := range status.Status().Details.Causes {
				if !strings.Contains(c.Message, "some validation rules were not checked") {
					causes = append(causes, c)
				}
			}
			if len(causes) != 1 {
				t.Errorf("%d causes, want 1: %v", len(causes), err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want it to say %q", err, tt.want)
			}
		})
	}

	o := valid()
	if err := c.Create(t.Context(), &o); err != nil {
		t.Fatalf("valid spec refused: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), &o) })
	if o.Spec.ManagementState != v1alpha1.Managed {
		t.Errorf("managementState defaulted to %q, want Managed", o.Spec.ManagementState)
	}
}
