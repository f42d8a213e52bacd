package bootstrap

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

func TestRenderStaticPod(t *testing.T) {
	files, err := Render(Options{
		Spec:      v1alpha1.CloudControllerManagerSpec{Platform: "local"},
		Namespace: "kube-system", Version: "dev", HostDir: DefaultHostDir,
		Kubeconfig:  "/etc/kubernetes/ccm.kubeconfig",
		CloudConfig: []byte("endpoint: http://10.0.0.1:8080\n"),
		CABundle:    []byte("pem"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(files[CloudConfigFile]); !strings.Contains(got, "requestTimeout: 10s") {
		t.Errorf("cloud config not transformed by the profile: %q", got)
	}
	if string(files[CABundleFile]) != "pem" {
		t.Errorf("CA bundle %q", files[CABundleFile])
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(files[ManifestFile], &pod); err != nil {
		t.Fatalf("the static pod is not a Pod: %v", err)
	}
	if pod.Name != PodName || pod.Namespace != "kube-system" {
		t.Errorf("pod %s/%s", pod.Namespace, pod.Name)
	}
	for k, v := range render.SelectorLabels {
		if pod.Labels[k] == v {
			t.Errorf("the static pod has the Deployment's selector label %s=%s: its ReplicaSet would adopt the mirror pod", k, v)
		}
	}
	s := pod.Spec
	if s.ServiceAccountName != "" || s.Affinity != nil {
		t.Errorf("a static pod cannot have a ServiceAccount or affinity: %q %v", s.ServiceAccountName, s.Affinity)
	}
	// Runs before any CNI: host network, the uninitialized and not-ready taints tolerated.
	if !s.HostNetwork {
		t.Error("not on the host network")
	}
	for _, key := range []string{cloudproviderapi.TaintExternalCloudProvider, corev1.TaintNodeNotReady} {
		if !slices.ContainsFunc(s.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == key }) {
			t.Errorf("does not tolerate %s", key)
		}
	}
	c := s.Containers[0]
	if c.Ports[0].ContainerPort != SecurePort || c.LivenessProbe.HTTPGet.Port.IntValue() != SecurePort || c.ReadinessProbe.HTTPGet.Port.IntValue() != SecurePort {
		t.Errorf("the static pod does not serve on %d beside a Deployment replica: %+v", SecurePort, c.Ports)
	}
	for _, v := range s.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s is not a host path", v.Name)
		} else if !strings.HasPrefix(v.HostPath.Path, "/etc/kubernetes/") {
			t.Errorf("volume %s at %s", v.Name, v.HostPath.Path)
		}
	}
	args := strings.Join(s.Containers[0].Args, " ")
	for _, want := range []string{"--kubeconfig=/etc/nephele/kubeconfig", "--cloud-config=/etc/nephele/cloud-config/cloud.conf",
		"--leader-elect=true", "--leader-elect-resource-namespace=kube-system", "--cloud-provider=local", "--secure-port=10268"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	_, err := Render(Options{Spec: v1alpha1.CloudControllerManagerSpec{Platform: "nosuch"}, Kubeconfig: "relative", HostDir: ""})
	if err == nil {
		t.Fatal("rendered")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Errorf("want one line per bad flag (3), got %q", lines)
	}
	for i, flag := range []string{"--kubeconfig-path", "--host-dir", "--platform"} {
		if i < len(lines) && !strings.Contains(lines[i], flag) {
			t.Errorf("line %d %q does not name %s", i, lines[i], flag)
		}
	}
}

// TestRenderWithoutCABundle checks that a rendering given no CA bundle trusts the roots
// nephele's images carry, not an empty SSL_CERT_FILE that would trust nothing.
func TestRenderWithoutCABundle(t *testing.T) {
	files, err := Render(Options{
		Spec:      v1alpha1.CloudControllerManagerSpec{Platform: "local"},
		Namespace: "kube-system", Version: "dev", HostDir: DefaultHostDir,
		Kubeconfig: "/etc/kubernetes/ccm.kubeconfig",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(files[CABundleFile]) {
		t.Fatalf("the CA bundle written without --ca-bundle holds no certificate (%d bytes)", len(files[CABundleFile]))
	}
}
