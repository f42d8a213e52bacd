package kubenode_test

import (
	"fmt"
	"os"

	"github.com/nephele-dev/nephele/kubenode"
)

// A node configuration is completed with the host's environment, then rendered.
func Example() {
	cfg := kubenode.Config{
		APIVersion:   kubenode.APIVersion,
		Kind:         kubenode.Kind,
		BinDir:       "/opt/nephele/bin",
		Runc:         "/usr/sbin/runc",
		APIServer:    kubenode.APIServer{URL: "https://10.88.0.1:6443", CAFile: "/etc/nephele/ca.crt"},
		Kubelet:      kubenode.Credentials{ClientCertFile: "/etc/nephele/node-1.crt", ClientKeyFile: "/etc/nephele/node-1.key"},
		KubeProxy:    kubenode.Credentials{ClientCertFile: "/etc/nephele/kube-proxy.crt", ClientKeyFile: "/etc/nephele/kube-proxy.key"},
		ClusterCIDR:  "10.244.0.0/16",
		Images:       []string{"/var/lib/nephele/images/pause.tar"},
		SandboxImage: "nephele.local/pause:dev",
	}
	// What a local cloud host sets for its boot command.
	hostEnv := map[string]string{
		kubenode.EnvInstanceName:    "node-1",
		kubenode.EnvInstanceAddress: "10.88.0.2",
		kubenode.EnvHostDir:         "/var/lib/nephele/hosts/node-1",
		kubenode.EnvHostCgroup:      "nephele/hosts/node-1",
	}
	node, err := cfg.Complete(func(k string) string { return hostEnv[k] }, kubenode.LookPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	files, err := kubenode.Render(node)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	for _, f := range files {
		fmt.Println(f.Path)
	}
	cni, _ := kubenode.RenderCNI(node, "10.244.1.0/24")
	fmt.Println(cni.Path)
	// Output:
	// /var/lib/nephele/hosts/node-1/node/config/containerd.toml
	// /var/lib/nephele/hosts/node-1/node/config/kube-proxy.kubeconfig
	// /var/lib/nephele/hosts/node-1/node/config/kube-proxy.yaml
	// /var/lib/nephele/hosts/node-1/node/config/kubelet.kubeconfig
	// /var/lib/nephele/hosts/node-1/node/config/kubelet.yaml
	// /var/lib/nephele/hosts/node-1/node/config/resolv.conf
	// /var/lib/nephele/hosts/node-1/node/cni/net.d/10-nephele.conflist
}
