package profiles

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

// Names of the objects the operator writes into the CCM's namespace, and where the CCM
// finds them.
const (
	// CloudConfigSecret is the synced (transformed) cloud config.
	CloudConfigSecret = "nephele-ccm-cloud-config"
	// CloudConfigKey is its key.
	CloudConfigKey = "cloud.conf"
	// TrustedCAConfigMap is the merged CA bundle.
	TrustedCAConfigMap = "nephele-ccm-trusted-ca"
	// TrustedCAKey is its key.
	TrustedCAKey = "ca-bundle.crt"
	// TrustedCADir is where the bundle is mounted in the CCM's containers; SSL_CERT_FILE
	// points Go's crypto/x509 (and OpenSSL) at the file in it.
	TrustedCADir    = "/etc/nephele/trusted-ca"
	trustedCAVolume = "trusted-ca"
)

// Labels and annotations the operator puts on what it renders.
const (
	// LabelManagedBy marks every object the operator applied; prune lists by it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "nephele-operator"
	// AnnotationConfigHash on a pod template is the hash of the ConfigMaps and Secrets
	// its pods mount, so a change to them rolls the pods.
	AnnotationConfigHash = "operator.nephele.dev/config-hash"
	// AnnotationVersion on a pod template is the operand version its pods run.
	AnnotationVersion = "operator.nephele.dev/version"
)

// Input is everything a rendering depends on beyond the profile.
type Input struct {
	// Spec is the CloudControllerManager's spec.
	Spec v1alpha1.CloudControllerManagerSpec
	// Namespace is the CCM's namespace.
	Namespace string
	// DefaultVersion is the tag used when the spec names neither version nor image: the
	// operator's own version.
	DefaultVersion string
	// SingleNode says the cluster has one node: the default replicas are 1.
	SingleNode bool
	// ConfigHash is the hash of the ConfigMaps and Secrets the CCM's pods mount.
	ConfigHash string
	// CSIConfigHash is the hash of the ConfigMaps and Secrets the CSI driver's pods
	// mount: their own, so that the driver's credentials roll the driver, not the CCM.
	CSIConfigHash string
}

// Rendering is the objects of one CCM and what they run.
type Rendering struct {
	// Objects in apply order.
	Objects []*unstructured.Unstructured
	// Image and Version the CCM runs.
	Image, Version string
	// CSI are the CSI driver's objects (spec.volumes), which Objects holds too.
	CSI []*unstructured.Unstructured
	// CSIImage and CSIVersion are the driver's image and version when spec.volumes is
	// set: the version is the image's tag, or the whole reference spec.volumes.image names.
	CSIImage, CSIVersion string
}

// Render returns the objects of the CCM the profile and in describe, or an error that
// names each bad field, one *FieldError per field (errors.As finds them, and through
// them deploy/render's *render.OptionError); nothing is rendered partly.
func Render(p Profile, in Input) (Rendering, error) {
	spec := in.Spec
	var errs []error
	bad := func(path *field.Path, format string, args ...any) {
		errs = append(errs, &FieldError{Field: path, Detail: fmt.Sprintf(format, args...)})
	}
	specPath := field.NewPath("spec")

	image, version := spec.Image, spec.Version
	switch {
	case image != "":
		version = image
	case p.Image == "":
		bad(specPath.Child("image"), "platform %s has no image of its own (%s): set spec.image", p.Name, p.Description)
	default:
		if version == "" {
			version = in.DefaultVersion
		}
		image = p.Image + ":" + version
	}
	provider := cmp(spec.Provider, p.Provider)
	if provider == "" {
		bad(specPath.Child("provider"), "platform %s runs any provider: set spec.provider to the image's provider name", p.Name)
	}
	if len(spec.FeatureGates) > 0 && !p.FeatureGates {
		bad(specPath.Child("featureGates"), "platform %s's cloud-controller-manager has no --feature-gates; remove them", p.Name)
	}

	o := render.DefaultOptions()
	o.Provider = provider
	o.Image = image
	o.Namespace = in.Namespace
	o.Replicas = render.DefaultReplicas
	if in.SingleNode {
		o.Replicas = 1
	}
	if spec.Replicas != nil {
		o.Replicas = int(*spec.Replicas)
	}
	o.CloudConfig = render.CloudConfig{Source: render.SourceNone}
	if spec.CloudConfig != nil {
		o.CloudConfig = render.CloudConfig{Source: render.SourceSecret, Name: CloudConfigSecret, Key: CloudConfigKey}
	}
	if spec.ClusterName != "" {
		o.ClusterName = spec.ClusterName
	}
	o.ClusterCIDR = cmp(spec.ClusterCIDR, p.ClusterCIDR)
	o.ConfigureCloudRoutes = p.ConfigureCloudRoutes
	if spec.ConfigureCloudRoutes != nil {
		o.ConfigureCloudRoutes = *spec.ConfigureCloudRoutes
	}
	if len(spec.Controllers) > 0 {
		o.Controllers = slices.Clone(spec.Controllers)
	}
	var appended []string // args nephele's flag set cannot check
	if p.NepheleFlags {
		o.ExtraArgs = slices.Clone(spec.ExtraArgs)
	} else {
		appended = slices.Clone(spec.ExtraArgs)
	}
	if len(spec.FeatureGates) > 0 {
		gates := make([]string, 0, len(spec.FeatureGates))
		for _, k := range slices.Sorted(maps.Keys(spec.FeatureGates)) {
			gates = append(gates, fmt.Sprintf("%s=%t", k, spec.FeatureGates[k]))
		}
		appended = append(appended, "--feature-gates="+strings.Join(gates, ","))
	}
	var csiOpts render.CSIOptions
	if spec.Volumes != nil {
		var err error
		if csiOpts, err = csiOptions(p, in); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Rendering{}, errors.Join(errs...)
	}
	objs, err := render.Render(o)
	if err != nil {
		return Rendering{}, specErrors(p, spec, err)
	}
	var csiObjs []*unstructured.Unstructured
	if spec.Volumes != nil {
		if csiObjs, err = render.RenderCSI(csiOpts); err != nil {
			return Rendering{}, csiSpecErrors(p, spec, err)
		}
	}
	extra, err := p.renderObjects(templateValues{Namespace: in.Namespace, Image: image, Provider: provider})
	if err != nil {
		return Rendering{}, err
	}
	objs = append(objs, extra...)
	for _, u := range objs {
		managed(u)
		switch u.GetKind() {
		case "Deployment", "DaemonSet":
			if err := decoratePods(u, spec.NodePlacement, appended, in.ConfigHash, version, u.GetName() == render.DeploymentName); err != nil {
				return Rendering{}, err
			}
		}
	}
	for _, u := range csiObjs {
		managed(u)
		switch u.GetKind() {
		case "Deployment", "DaemonSet":
			// No node placement: the node plugin must run on every node that mounts a
			// volume, and the CCM's placement says where the CCM runs.
			if err := decoratePods(u, nil, nil, in.CSIConfigHash, csiVersion(in), false); err != nil {
				return Rendering{}, err
			}
		}
	}
	r := Rendering{Objects: append(objs, csiObjs...), Image: image, Version: version, CSI: csiObjs}
	if spec.Volumes != nil {
		r.CSIImage, r.CSIVersion = csiOpts.DriverImage, csiVersion(in)
	}
	return r, nil
}

// csiVersion is the CSI driver's version: spec.volumes.image when it names one, else the
// tag of the profile's driver image (spec.version or the operator's version).
func csiVersion(in Input) string {
	if v := in.Spec.Volumes; v != nil && v.Image != "" {
		return v.Image
	}
	return cmp(in.Spec.Version, in.DefaultVersion)
}

// managed labels u as the operator's.
func managed(u *unstructured.Unstructured) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = ManagedByValue
	u.SetLabels(labels)
}

// csiOptions are the CSI driver's manifest options for spec.volumes: the profile's
// driver at the CCM's version unless spec.volumes.image names one, the sidecars nephele
// pins unless named, the cloud config Secret the sync writes, in the CCM's namespace.
func csiOptions(p Profile, in Input) (render.CSIOptions, error) {
	v := in.Spec.Volumes
	if p.CSI == nil {
		return render.CSIOptions{}, &FieldError{Field: field.NewPath("spec", "volumes"),
			Detail: fmt.Sprintf("platform %s has no CSI driver (%s): remove spec.volumes and install the platform's driver yourself", p.Name, p.Description)}
	}
	o := render.DefaultCSIOptions()
	o.Namespace = in.Namespace
	o.MaxVolumesPerNode = p.CSI.MaxVolumesPerNode
	o.DriverImage = v.Image
	if o.DriverImage == "" {
		o.DriverImage = p.CSI.DriverImage + ":" + csiVersion(in)
	}
	o.ProvisionerImage = cmp(v.ProvisionerImage, o.ProvisionerImage)
	o.AttacherImage = cmp(v.AttacherImage, o.AttacherImage)
	o.ResizerImage = cmp(v.ResizerImage, o.ResizerImage)
	o.DeviceDirs = slices.Clone(v.DeviceDirs)
	// decoratePods mounts the trusted CA bundle into every container.
	o.ReservedDirs = []string{TrustedCADir}
	if v.StorageClass != nil {
		o.StorageClass = *v.StorageClass
	}
	return o, nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// templateValues are what a profile's object templates may use.
type templateValues struct {
	Namespace, Image, Provider string
}

// renderObjects executes the profile's object templates (missing keys are errors) and
// decodes each document strictly.
func (p Profile) renderObjects(v templateValues) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range p.Objects {
		t, err := template.New(name).Option("missingkey=error").Parse(p.templates[name])
		if err != nil {
			return nil, fmt.Errorf("profile %s: template %s: %w", p.Name, name, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, v); err != nil {
			return nil, fmt.Errorf("profile %s: template %s: %w", p.Name, name, err)
		}
		for i, doc := range splitDocuments(buf.Bytes()) {
			var m map[string]any
			if err := yaml.UnmarshalStrict(doc, &m); err != nil {
				return nil, fmt.Errorf("profile %s: template %s document %d: %w", p.Name, name, i, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetKind() == "" || u.GetName() == "" {
				return nil, fmt.Errorf("profile %s: template %s document %d has no kind or name", p.Name, name, i)
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.Equal(bytes.TrimSpace(line), []byte("---")) {
			docs = append(docs, slices.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

// decoratePods adds to a Deployment's or DaemonSet's pod template what the spec and the
// operator's syncs ask: node placement, args the profile's flag set does not check
// (ccm only), the trusted CA bundle, the config hash and the version.
func decoratePods(u *unstructured.Unstructured, np *v1alpha1.NodePlacement, args []string, hash, version string, ccm bool) error {
	tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
	podSpec, _, _ := unstructured.NestedMap(tmpl, "spec")
	if podSpec == nil {
		return fmt.Errorf("%s %s has no pod template", u.GetKind(), u.GetName())
	}
	if np != nil {
		if len(np.NodeSelector) > 0 {
			sel, _, _ := unstructured.NestedStringMap(podSpec, "nodeSelector")
			if sel == nil {
				sel = map[string]string{}
			}
			maps.Copy(sel, np.NodeSelector)
			_ = unstructured.SetNestedStringMap(podSpec, sel, "nodeSelector")
		}
		if len(np.Tolerations) > 0 {
			tols, _, _ := unstructured.NestedSlice(podSpec, "tolerations")
			for _, t := range np.Tolerations {
				m, err := toMap(t)
				if err != nil {
					return err
				}
				tols = append(tols, m)
			}
			_ = unstructured.SetNestedSlice(podSpec, tols, "tolerations")
		}
	}
	containers, _, _ := unstructured.NestedSlice(podSpec, "containers")
	for i, c := range containers {
		cm := c.(map[string]any)
		if ccm {
			a, _, _ := unstructured.NestedStringSlice(cm, "args")
			_ = unstructured.SetNestedStringSlice(cm, append(a, args...), "args")
		}
		env, _, _ := unstructured.NestedSlice(cm, "env")
		env = append(env, map[string]any{"name": "SSL_CERT_FILE", "value": TrustedCADir + "/" + TrustedCAKey})
		_ = unstructured.SetNestedSlice(cm, env, "env")
		mounts, _, _ := unstructured.NestedSlice(cm, "volumeMounts")
		mounts = append(mounts, map[string]any{"name": trustedCAVolume, "mountPath": TrustedCADir, "readOnly": true})
		_ = unstructured.SetNestedSlice(cm, mounts, "volumeMounts")
		containers[i] = cm
	}
	_ = unstructured.SetNestedSlice(podSpec, containers, "containers")
	vols, _, _ := unstructured.NestedSlice(podSpec, "volumes")
	vols = append(vols, map[string]any{"name": trustedCAVolume, "configMap": map[string]any{"name": TrustedCAConfigMap}})
	_ = unstructured.SetNestedSlice(podSpec, vols, "volumes")
	_ = unstructured.SetNestedMap(tmpl, podSpec, "spec")
	ann, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationConfigHash] = hash
	ann[AnnotationVersion] = version
	_ = unstructured.SetNestedStringMap(tmpl, ann, "metadata", "annotations")
	return unstructured.SetNestedMap(u.Object, tmpl, "spec", "template")
}

// toMap converts a typed value to its JSON map form.
func toMap(v any) (map[string]any, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", v, err)
	}
	return m, nil
}
