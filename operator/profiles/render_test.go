package profiles

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenInputs are the inputs every profile renders in TestGolden: what a typical
// spec for the platform says.
var goldenInputs = map[string]Input{
	"local": {
		Spec: v1alpha1.CloudControllerManagerSpec{
			Platform:    "local",
			CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: "default", Name: "local-cloud"},
		},
		Namespace: "kube-system", DefaultVersion: "dev", ConfigHash: "0123abcd",
	},
	"generic": {
		Spec: v1alpha1.CloudControllerManagerSpec{
			Platform: "generic", Provider: "openstack", Image: "registry.example/openstack-ccm:v1.36.0",
			Replicas:     ptr.To(int32(3)),
			ExtraArgs:    []string{"--v=2"},
			FeatureGates: map[string]bool{"B": false, "A": true},
			NodePlacement: &v1alpha1.NodePlacement{
				NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": ""},
				Tolerations:  []corev1.Toleration{{Key: "example.com/dedicated", Operator: corev1.TolerationOpExists}},
			},
		},
		Namespace: "cloud-system", DefaultVersion: "dev", ConfigHash: "0123abcd",
	},
	"generic-node-manager": {
		Spec: v1alpha1.CloudControllerManagerSpec{
			Platform: "generic-node-manager", Provider: "azure", Image: "registry.example/azure-ccm:v1.36.0",
			CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceConfigMap, Namespace: "default", Name: "azure"},
		},
		Namespace: "kube-system", DefaultVersion: "dev", SingleNode: true, ConfigHash: "0123abcd",
	},
}

// TestGolden renders every built-in profile to testdata/<platform>.yaml.
func TestGolden(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			in, ok := goldenInputs[name]
			if !ok {
				t.Fatalf("profile %s has no golden input", name)
			}
			p, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Render(p, in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := render.YAML(r.Objects)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", name+".yaml")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test ./operator/profiles -run TestGolden -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s is stale; go test ./operator/profiles -run TestGolden -update rewrites it. Got:\n%s", file, got)
			}
		})
	}
}

// TestRenderRefuses: every invalid spec gives one error that names the field and fix.
func TestRenderRefuses(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.CloudControllerManagerSpec
		want string
	}{
		{"generic without image", v1alpha1.CloudControllerManagerSpec{Platform: "generic", Provider: "x"}, "spec.image: platform generic has no image of its own"},
		{"generic without provider", v1alpha1.CloudControllerManagerSpec{Platform: "generic", Image: "x/y:1"}, "spec.provider: platform generic runs any provider"},
		{"feature gates on local", v1alpha1.CloudControllerManagerSpec{Platform: "local", FeatureGates: map[string]bool{"A": true}}, "spec.featureGates: platform local's cloud-controller-manager has no --feature-gates"},
		{"unknown flag on local", v1alpha1.CloudControllerManagerSpec{Platform: "local", ExtraArgs: []string{"--no-such-flag=1"}}, `spec.extraArgs[0]: invalid value "--no-such-flag=1": the cloud-controller-manager has no flag --no-such-flag`},
		{"owned flag on local", v1alpha1.CloudControllerManagerSpec{Platform: "local", ExtraArgs: []string{"--cloud-provider=aws"}}, "spec.extraArgs[0]: invalid value \"--cloud-provider=aws\": --cloud-provider is set by the rendering: use spec.provider"},
		{"unknown controller on local", v1alpha1.CloudControllerManagerSpec{Platform: "local", Controllers: []string{"volume"}}, `spec.controllers: invalid value "volume": unknown controller "volume"`},
		{"device dir over the CA bundle", v1alpha1.CloudControllerManagerSpec{Platform: "local", Volumes: &v1alpha1.Volumes{DeviceDirs: []string{"/etc/nephele"}}}, `spec.volumes.deviceDirs[0]: invalid value "/etc/nephele": overlaps /etc/nephele/trusted-ca`},
		{"volumes on generic", v1alpha1.CloudControllerManagerSpec{Platform: "generic", Provider: "x", Image: "registry.example/y:1", Volumes: &v1alpha1.Volumes{}}, "spec.volumes: platform generic has no CSI driver"},
		{"routes without CIDR", v1alpha1.CloudControllerManagerSpec{Platform: "generic", Provider: "x", Image: "registry.example/y:1", ConfigureCloudRoutes: ptr.To(true)}, `spec.clusterCIDR: invalid value "": required while the route controller runs (spec.configureCloudRoutes); set it, or spec.configureCloudRoutes=false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load(tt.spec.Platform)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Render(p, Input{Spec: tt.spec, Namespace: "kube-system", DefaultVersion: "dev"})
			if err == nil {
				t.Fatalf("rendered; want %q", tt.want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("%d errors, want 1: %v", n, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want %q", err, tt.want)
			}
		})
	}
}

// TestRenderFieldErrors: what deploy/render refuses comes back as a *FieldError on the
// spec's field that set the option (the item of spec.extraArgs kept), with render's
// *render.OptionError and the parser's error still in the chain; what the profile or
// the operator set stays render's error, under the platform's name.
func TestRenderFieldErrors(t *testing.T) {
	generic := func(s v1alpha1.CloudControllerManagerSpec) v1alpha1.CloudControllerManagerSpec {
		s.Platform, s.Provider = "generic", "x"
		if s.Image == "" {
			s.Image = "registry.example/y:1"
		}
		return s
	}
	tests := []struct {
		name    string
		spec    v1alpha1.CloudControllerManagerSpec
		version string   // Input.DefaultVersion; "" is dev
		fields  []string // the *FieldError paths, in order; nil: none
		option  string   // render's option in the chain
		cause   error    // errors.Is target beyond render's error, or nil
	}{
		{name: "second extra arg", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", ExtraArgs: []string{"--v=2", "--concurrent-service-syncs=many"}},
			fields: []string{"spec.extraArgs[1]"}, option: "extra-arg"},
		{name: "image", spec: generic(v1alpha1.CloudControllerManagerSpec{Image: "Registry.Example/Y:1"}),
			fields: []string{"spec.image"}, option: "image", cause: &name.ErrBadName{}},
		{name: "cluster CIDR", spec: generic(v1alpha1.CloudControllerManagerSpec{ClusterCIDR: "10.0.0.0/16,10.1.0.0/16", ConfigureCloudRoutes: ptr.To(true)}),
			fields: []string{"spec.clusterCIDR"}, option: "cluster-cidr"},
		{name: "two fields", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", Controllers: []string{"volume"}, ExtraArgs: []string{"--kubeconfig=/x"}},
			fields: []string{"spec.controllers", "spec.extraArgs[0]"}, option: "controllers"},
		{name: "provider", spec: v1alpha1.CloudControllerManagerSpec{Platform: "generic", Provider: "Not_A_Name", Image: "registry.example/y:1"},
			fields: []string{"spec.provider"}, option: "provider"},
		{name: "version", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", Version: "v1 2"},
			fields: []string{"spec.version"}, option: "image", cause: &name.ErrBadName{}},
		{name: "device dir", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", Volumes: &v1alpha1.Volumes{DeviceDirs: []string{"/var/lib/cloud", "/dev/disk"}}},
			fields: []string{"spec.volumes.deviceDirs[1]"}, option: "device-dir"},
		{name: "driver image", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", Volumes: &v1alpha1.Volumes{Image: "Registry.Example/Driver:v1"}},
			fields: []string{"spec.volumes.image"}, option: "driver-image", cause: &name.ErrBadName{}},
		{name: "sidecar image", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", Volumes: &v1alpha1.Volumes{ResizerImage: "a b"}},
			fields: []string{"spec.volumes.resizerImage"}, option: "resizer-image"},
		// The operator's default version is no field of the spec: render's error, as it is.
		{name: "the operator's version", spec: v1alpha1.CloudControllerManagerSpec{Platform: "local"}, version: "not a tag",
			option: "image", cause: &name.ErrBadName{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load(tt.spec.Platform)
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Spec: tt.spec, Namespace: "kube-system", DefaultVersion: cmp(tt.version, "dev")}
			_, err = Render(p, in)
			if err == nil {
				t.Fatal("rendered")
			}
			if tt.fields == nil && !strings.HasPrefix(err.Error(), "platform local: invalid value for --image: ") {
				t.Errorf("%q: want render's message under the platform's name", err)
			}
			var got []string
			for _, e := range flatten(err) {
				var fe *FieldError
				if errors.As(e, &fe) {
					got = append(got, fe.Field.String())
					if !strings.HasPrefix(e.Error(), fe.Field.String()+": ") || strings.Contains(e.Error(), "--extra-arg") {
						t.Errorf("%q does not open with its field, or names render's flags", e)
					}
				}
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("field errors on %v, want %v: %v", got, tt.fields, err)
			}
			var oe *render.OptionError
			if !errors.As(err, &oe) || oe.Option != tt.option {
				t.Errorf("errors.As(*render.OptionError) = %+v, want option %q: the chain is lost", oe, tt.option)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("errors.Is(%T) is false: the parser's error is lost", tt.cause)
			}
		})
	}
}

// TestRenderAcceptsWhatTheCCMAccepts: a cluster CIDR with host bits, which the manager
// takes as its network, renders (deploy/render once refused it).
func TestRenderAcceptsWhatTheCCMAccepts(t *testing.T) {
	p, err := Load("local")
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.CloudControllerManagerSpec{Platform: "local", ClusterCIDR: "10.244.0.1/16"}
	if _, err := Render(p, Input{Spec: spec, Namespace: "kube-system", DefaultVersion: "dev"}); err != nil {
		t.Errorf("spec.clusterCIDR 10.244.0.1/16 refused: %v", err)
	}
}

// flatten returns the errors errors.Join joined in err, or err alone.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestLoadUnknownPlatform(t *testing.T) {
	for _, name := range []string{"aws", "../data/local", "node-manager.yaml"} {
		_, err := Load(name)
		var u *UnknownPlatformError
		if !errors.As(err, &u) {
			t.Fatalf("Load(%q) = %v, want UnknownPlatformError", name, err)
		}
		if !strings.Contains(err.Error(), "generic, generic-node-manager, local") {
			t.Errorf("error %q does not list the known platforms", err)
		}
	}
}

func TestTransformCloudConfig(t *testing.T) {
	p, err := Load("local")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"endpoint: http://127.0.0.1:1\n", "endpoint: http://127.0.0.1:1\nrequestTimeout: 10s\n"},
		{"endpoint: x\nrequestTimeout: 3s\n", "endpoint: x\nrequestTimeout: 3s\n"},
	}
	for _, tt := range tests {
		got, err := p.TransformCloudConfig([]byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("transform(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if _, err := p.TransformCloudConfig([]byte("- a list\n")); err == nil {
		t.Error("a list was accepted as the local cloud config")
	}
	g, _ := Load("generic")
	if got, _ := g.TransformCloudConfig([]byte("[Global]\nx=1\n")); string(got) != "[Global]\nx=1\n" {
		t.Errorf("generic changed an opaque config: %q", got)
	}
}

// TestRunsBeforeCNI: every profile's Deployments and DaemonSets run on the host network
// and tolerate the taints of a Node no CNI and no CCM has touched yet, as OpenShift's
// checkResourceRunsBeforeCNI checks: the CNI waits for Nodes the CCM initializes.
func TestRunsBeforeCNI(t *testing.T) {
	for _, name := range Names() {
		p, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Render(p, goldenInputs[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range r.Objects {
			if k := u.GetKind(); k != "Deployment" && k != "DaemonSet" {
				continue
			}
			var spec corev1.PodSpec
			m, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
				t.Fatal(err)
			}
			if !spec.HostNetwork {
				t.Errorf("%s: %s %s is not on the host network", name, u.GetKind(), u.GetName())
			}
			for _, taint := range []corev1.Taint{
				{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule},
			} {
				if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) }) {
					t.Errorf("%s: %s %s does not tolerate %s", name, u.GetKind(), u.GetName(), taint.Key)
				}
			}
		}
	}
}

// TestRenderVolumes: spec.volumes renders deploy/render's CSI driver in the CCM's
// namespace with the profile's driver at the CCM's version, the user's device dirs and
// sidecars, labelled as the operator's; its pods carry their own config hash and none of
// the CCM's placement; StorageClass false leaves the class out.
func TestRenderVolumes(t *testing.T) {
	p, err := Load("local")
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.CloudControllerManagerSpec{
		Platform: "local", Version: "v9",
		NodePlacement: &v1alpha1.NodePlacement{NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Volumes: &v1alpha1.Volumes{
			CloudConfig:   v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: "nephele-config", Name: "csi"},
			AttacherImage: "registry.example/attacher:v4.99", DeviceDirs: []string{"/var/lib/cloud/hosts"},
		},
	}
	in := Input{Spec: spec, Namespace: "cloud-system", DefaultVersion: "dev", ConfigHash: "ccm-hash", CSIConfigHash: "csi-hash"}
	r, err := Render(p, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.CSIImage != "nephele.local/csi-driver:v9" || r.CSIVersion != "v9" {
		t.Errorf("CSIImage, CSIVersion = %q, %q; want the profile's driver at spec.version", r.CSIImage, r.CSIVersion)
	}
	o := render.DefaultCSIOptions()
	o.Namespace, o.DriverImage, o.AttacherImage = "cloud-system", r.CSIImage, "registry.example/attacher:v4.99"
	o.DeviceDirs, o.MaxVolumesPerNode = []string{"/var/lib/cloud/hosts"}, p.CSI.MaxVolumesPerNode
	want, err := render.RenderCSI(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.CSI) != len(want) {
		t.Fatalf("%d CSI objects, want RenderCSI's %d", len(r.CSI), len(want))
	}
	for i, u := range r.CSI {
		if u.GetKind() != want[i].GetKind() || u.GetName() != want[i].GetName() || u.GetNamespace() != want[i].GetNamespace() {
			t.Errorf("CSI object %d is %s %s/%s, want %s %s/%s", i, u.GetKind(), u.GetNamespace(), u.GetName(),
				want[i].GetKind(), want[i].GetNamespace(), want[i].GetName())
		}
		if u.GetLabels()[LabelManagedBy] != ManagedByValue {
			t.Errorf("%s %s is not labelled as the operator's", u.GetKind(), u.GetName())
		}
		if !slices.Contains(r.Objects, u) {
			t.Errorf("%s %s is not among the rendering's Objects", u.GetKind(), u.GetName())
		}
		if k := u.GetKind(); k != "Deployment" && k != "DaemonSet" {
			continue
		}
		hash, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", AnnotationConfigHash)
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "nodeSelector")
		if hash != "csi-hash" || len(sel) > 0 {
			t.Errorf("%s %s: config hash %q, node selector %v; want the CSI driver's hash and no placement", u.GetKind(), u.GetName(), hash, sel)
		}
		images := map[string]bool{}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			img, _, _ := unstructured.NestedString(c.(map[string]any), "image")
			images[img] = true
		}
		if !images[r.CSIImage] {
			t.Errorf("%s %s runs %v, not the driver %s", u.GetKind(), u.GetName(), images, r.CSIImage)
		}
	}
	for _, u := range r.Objects {
		if u.GetName() == render.DeploymentName && u.GetKind() == "Deployment" {
			hash, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", AnnotationConfigHash)
			if hash != "ccm-hash" {
				t.Errorf("the CCM's config hash is %q, want its own", hash)
			}
		}
	}

	spec.Volumes.StorageClass = ptr.To(false)
	in.Spec = spec
	if r, err = Render(p, in); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(r.Objects, func(u *unstructured.Unstructured) bool { return u.GetKind() == "StorageClass" }) {
		t.Error("spec.volumes.storageClass false still renders a StorageClass")
	}
	if len(r.CSI) != len(want)-1 {
		t.Errorf("%d CSI objects without the class, want %d", len(r.CSI), len(want)-1)
	}
}
