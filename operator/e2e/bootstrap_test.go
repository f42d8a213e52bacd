package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/localcluster"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/bootstrap"
)

// nodeDirs are node-1's host directory (which its kubelet sees at the same path) and
// its kubelet's staticPodPath.
func nodeDirs(c *localcluster.Cluster, cfg localcluster.Config) (host, static string) {
	host = filepath.Join(cfg.Dir, "hosts", c.Nodes[0].InstanceID)
	return host, filepath.Join(host, "node", "manifests")
}

// bootstrapStaticPod renders the CCM with `nephele-operator render`'s code, puts its
// files in node-1's host directory and its static pod in node-1's staticPodPath, and
// waits until the static CCM leads and has initialized every Node. It returns the
// Lease holder.
func bootstrapStaticPod(t *testing.T, c *localcluster.Cluster, cfg localcluster.Config, o render.Options) string {
	t.Helper()
	host, static := nodeDirs(c, cfg)
	dir := filepath.Join(host, "ccm-bootstrap")
	cloudConfig, err := c.CloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	files, err := bootstrap.Render(bootstrap.Options{
		Spec:      v1alpha1.CloudControllerManagerSpec{Platform: "local", ClusterName: o.ClusterName, ClusterCIDR: o.ClusterCIDR},
		Namespace: o.Namespace, Version: images.DefaultVersion, HostDir: dir, Kubeconfig: kubeconfig,
		CloudConfig: cloudConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		path := filepath.Join(dir, strings.TrimPrefix(name, "files/"))
		if name == bootstrap.ManifestFile {
			continue
		}
		writeFile(t, path, data)
	}
	writeKubeconfig(t, c, kubeconfig)
	start := time.Now()
	writeFile(t, filepath.Join(static, filepath.Base(bootstrap.ManifestFile)), files[bootstrap.ManifestFile])
	cl, err := client.New(c.Env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the static pod's CCM initializes every Node", func(ctx context.Context) error {
		var nodes corev1.NodeList
		if err := cl.List(ctx, &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if n.Spec.ProviderID == "" {
				return fmt.Errorf("node %s has no provider ID; pods: %s", n.Name, podStates(ctx, cl, o.Namespace))
			}
		}
		return nil
	})
	holder := leaseHolder(t.Context(), t, cl, o.Namespace)
	t.Logf("static pod: Nodes initialized %s after the manifest was written; %s leads", time.Since(start).Round(time.Second), holder)
	return holder
}

// handOver removes the static pod's manifest and waits until a Deployment replica holds
// the Lease, sampling it to measure the time with no holder.
func handOver(t *testing.T, c *localcluster.Cluster, cfg localcluster.Config, cl client.Client, namespace, staticHolder string) {
	t.Helper()
	_, static := nodeDirs(c, cfg)
	if err := os.Remove(filepath.Join(static, filepath.Base(bootstrap.ManifestFile))); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	var released, acquired time.Time
	within(t, "a Deployment replica takes the Lease over from the static pod", func(ctx context.Context) error {
		h := leaseHolder(ctx, t, cl, namespace)
		switch {
		case h == "" && released.IsZero():
			released = time.Now()
		case h != "" && h != staticHolder:
			acquired = time.Now()
			return nil
		}
		return fmt.Errorf("held by %q", h)
	})
	if released.IsZero() {
		t.Logf("hand-over: a replica held the Lease %s after the static pod's manifest was removed; no sample saw it free",
			acquired.Sub(removed).Round(100*time.Millisecond))
		return
	}
	t.Logf("hand-over: the Lease was seen free %s after the static pod's manifest was removed; a replica held it %s later",
		released.Sub(removed).Round(100*time.Millisecond), acquired.Sub(released).Round(100*time.Millisecond))
}

func leaseHolder(ctx context.Context, t *testing.T, cl client.Client, namespace string) string {
	var l coordinationv1.Lease
	if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: render.LeaseName}, &l); err != nil {
		return ""
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes the admin's credentials, inline, for the static CCM. The
// file is readable by the image's user (uid 65532), as docs/operator.md says it must be.
func writeKubeconfig(t *testing.T, c *localcluster.Cluster, path string) {
	t.Helper()
	ca := c.Env.Config.TLSClientConfig.CAData
	if len(ca) == 0 {
		var err error
		if ca, err = os.ReadFile(c.Env.Config.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: c.Env.APIServerURL, CertificateAuthorityData: ca}
	kc.AuthInfos["ccm"] = &clientcmdapi.AuthInfo{Token: c.Env.Token}
	kc.Contexts["ccm"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "ccm"}
	kc.CurrentContext = "ccm"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data)
}
