package bootstrap

import (
	"errors"
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// Paths inside Render's output directory, and so, after copying, on the node.
const (
	// ManifestFile is the static pod, for the kubelet's staticPodPath.
	ManifestFile = "manifests/nephele-ccm-bootstrap.yaml"
	// CloudConfigFile is the transformed cloud config, under HostDir.
	CloudConfigFile = "files/cloud-config/" + profiles.CloudConfigKey
	// CABundleFile is the trusted CA bundle, under HostDir.
	CABundleFile = "files/trusted-ca/" + profiles.TrustedCAKey
	// PodName is the static pod's name (the kubelet appends the node's).
	PodName = "nephele-ccm-bootstrap"
	// DefaultHostDir is where the files directory is copied on the node.
	DefaultHostDir = "/etc/kubernetes/nephele-ccm"
	// SecurePort is the static pod's health and metrics port: not the Deployment's
	// (render.SecurePort), because both are on the host network and a Deployment
	// replica on the bootstrap node waits as a follower beside the static pod.
	SecurePort       = 10268
	kubeconfigMount  = "/etc/nephele/kubeconfig"
	kubeconfigVolume = "kubeconfig"
)

// Options are what a bootstrap rendering needs.
type Options struct {
	// Spec is the CCM as the CloudControllerManager will say; CloudConfig and
	// TrustedCA are ignored (CloudConfig and CABundle below are used).
	Spec v1alpha1.CloudControllerManagerSpec
	// Namespace of the static pod and of the Lease; the Deployment's namespace.
	Namespace string
	// Version is the default image tag (the operator's version).
	Version string
	// HostDir is where the output's files/ directory is on the node.
	HostDir string
	// Kubeconfig is the path, on the node, of the kubeconfig the CCM uses.
	Kubeconfig string
	// CloudConfig is the provider's configuration file, or nil for none.
	CloudConfig []byte
	// CABundle is the PEM bundle the CCM trusts (SSL_CERT_FILE); empty means the roots
	// nephele's images carry (images.CABundle), not an empty file that would trust
	// nothing.
	CABundle []byte
}

// Render returns the files of a bootstrap rendering, by path relative to the output
// directory: the static pod (ManifestFile) and the files it mounts.
func Render(o Options) (map[string][]byte, error) {
	var errs []error
	if o.Kubeconfig == "" || !path.IsAbs(o.Kubeconfig) {
		errs = append(errs, fmt.Errorf("invalid value for --kubeconfig-path: %q: want the absolute path of the CCM's kubeconfig on the node", o.Kubeconfig))
	}
	if o.HostDir == "" || !path.IsAbs(o.HostDir) {
		errs = append(errs, fmt.Errorf("invalid value for --host-dir: %q: want an absolute path on the node", o.HostDir))
	}
	p, err := profiles.Load(o.Spec.Platform)
	if err != nil {
		errs = append(errs, fmt.Errorf("invalid value for --platform: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	spec := o.Spec
	spec.TrustedCA = nil
	spec.CloudConfig = nil
	if o.CloudConfig != nil {
		// Any source: it only makes the rendering mount a cloud config.
		spec.CloudConfig = &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: o.Namespace, Name: profiles.CloudConfigSecret}
	}
	r, err := profiles.Render(p, profiles.Input{Spec: spec, Namespace: o.Namespace, DefaultVersion: o.Version, SingleNode: true})
	if err != nil {
		return nil, err
	}
	var dep *unstructured.Unstructured
	for _, u := range r.Objects {
		if u.GetKind() == "Deployment" && u.GetName() == render.DeploymentName {
			dep = u
		}
	}
	if dep == nil {
		return nil, fmt.Errorf("platform %s renders no Deployment %s", p.Name, render.DeploymentName)
	}
	pod, err := staticPod(dep, o)
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode the static pod: %w", err)
	}
	ca := o.CABundle
	if len(ca) == 0 {
		if ca, err = images.CABundle(); err != nil {
			return nil, err
		}
	}
	files := map[string][]byte{
		ManifestFile: append([]byte("# Rendered by `nephele-operator render`; the operator's Deployment replaces it (docs/operator.md).\n"), data...),
		CABundleFile: ca,
	}
	if o.CloudConfig != nil {
		cc, err := p.TransformCloudConfig(o.CloudConfig)
		if err != nil {
			return nil, fmt.Errorf("invalid value for --cloud-config: %w", err)
		}
		files[CloudConfigFile] = cc
	}
	return files, nil
}

// staticPod turns the Deployment's pod template into a static pod.
func staticPod(dep *unstructured.Unstructured, o Options) (map[string]any, error) {
	tmpl, _, _ := unstructured.NestedMap(dep.Object, "spec", "template")
	spec, _, _ := unstructured.NestedMap(tmpl, "spec")
	for _, f := range []string{"serviceAccountName", "affinity", "nodeSelector"} {
		delete(spec, f)
	}
	spec["automountServiceAccountToken"] = false
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for i, v := range vols {
		vm := v.(map[string]any)
		dir := ""
		switch {
		case vm["secret"] != nil:
			dir = path.Dir(CloudConfigFile)
		case vm["configMap"] != nil:
			dir = path.Dir(CABundleFile)
		default:
			continue
		}
		vols[i] = map[string]any{"name": vm["name"], "hostPath": map[string]any{
			"path": path.Join(o.HostDir, dir[len("files/"):]), "type": "Directory"}}
	}
	vols = append(vols, map[string]any{"name": kubeconfigVolume, "hostPath": map[string]any{"path": o.Kubeconfig, "type": "File"}})
	_ = unstructured.SetNestedSlice(spec, vols, "volumes")
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	for i, c := range containers {
		cm := c.(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(cm, "args")
		for j, a := range args {
			if a == fmt.Sprintf("--secure-port=%d", render.SecurePort) {
				args[j] = fmt.Sprintf("--secure-port=%d", SecurePort)
			}
		}
		_ = unstructured.SetNestedStringSlice(cm, append(args, "--kubeconfig="+kubeconfigMount), "args")
		setPort(cm)
		mounts, _, _ := unstructured.NestedSlice(cm, "volumeMounts")
		mounts = append(mounts, map[string]any{"name": kubeconfigVolume, "mountPath": kubeconfigMount, "readOnly": true})
		_ = unstructured.SetNestedSlice(cm, mounts, "volumeMounts")
		containers[i] = cm
	}
	_ = unstructured.SetNestedSlice(spec, containers, "containers")
	meta, _, _ := unstructured.NestedMap(tmpl, "metadata")
	if meta == nil {
		meta = map[string]any{}
	}
	meta["name"] = PodName
	// Not the Deployment's selector labels: its ReplicaSet would adopt the mirror pod,
	// and its anti-affinity would keep a replica off the bootstrap node.
	labels, _, _ := unstructured.NestedStringMap(meta, "labels")
	if labels == nil {
		labels = map[string]string{}
	}
	for k := range render.SelectorLabels {
		labels[k] = PodName
	}
	_ = unstructured.SetNestedStringMap(meta, labels, "labels")
	meta["namespace"] = o.Namespace
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, nil
}

// setPort moves the container's port and its probes to SecurePort.
func setPort(container map[string]any) {
	ports, _, _ := unstructured.NestedSlice(container, "ports")
	for i, p := range ports {
		pm := p.(map[string]any)
		if fmt.Sprint(pm["containerPort"]) == fmt.Sprint(render.SecurePort) {
			pm["containerPort"] = int64(SecurePort)
		}
		ports[i] = pm
	}
	_ = unstructured.SetNestedSlice(container, ports, "ports")
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if _, ok, _ := unstructured.NestedFieldNoCopy(container, probe, "httpGet", "port"); ok {
			_ = unstructured.SetNestedField(container, int64(SecurePort), probe, "httpGet", "port")
		}
	}
}
