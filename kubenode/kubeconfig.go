package kubenode

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// renderKubeconfig renders a kubeconfig for a component with the given credentials. A
// kubeconfig given as such is used as it is and renders to nothing. Files are referred
// to, not inlined, so rotated certificates and tokens are read again.
func renderKubeconfig(n *Node, user string, cr Credentials) ([]byte, error) {
	if cr.Kubeconfig != "" {
		return nil, nil
	}
	a := n.Config.APIServer
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nephele"] = &clientcmdapi.Cluster{Server: a.URL, CertificateAuthority: a.CAFile, TLSServerName: a.TLSServerName}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificate: cr.ClientCertFile,
		ClientKey:         cr.ClientKeyFile,
		TokenFile:         cr.TokenFile,
	}
	cfg.Contexts["nephele"] = &clientcmdapi.Context{Cluster: "nephele", AuthInfo: user}
	cfg.CurrentContext = "nephele"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig for %s: %w", user, err)
	}
	return data, nil
}

// kubeletKubeconfig is the kubeconfig kubelet uses: the one given, or the rendered one.
func (n *Node) kubeletKubeconfig() string {
	if n.Config.Kubelet.Kubeconfig != "" {
		return n.Config.Kubelet.Kubeconfig
	}
	return n.Paths.KubeletKubeconfig
}

// proxyKubeconfig is the kubeconfig kube-proxy uses: the one given, or the rendered one.
func (n *Node) proxyKubeconfig() string {
	if n.Config.KubeProxy.Kubeconfig != "" {
		return n.Config.KubeProxy.Kubeconfig
	}
	return n.Paths.ProxyKubeconfig
}

// restConfig is the client configuration of kubeconfig, for the runtime's own calls.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
