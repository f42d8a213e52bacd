package kubenode

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config/v1alpha1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/cloud"
)

// Ports of kube-proxy inside the host's network namespace: upstream's defaults.
const (
	// ProxyHealthzPort is kube-proxy's health check port. It listens on every address of
	// the host, because load balancers probe it: for Services with externalTrafficPolicy
	// Cluster here directly (the local cloud does, as real clouds do), for Local through
	// the Service's healthCheckNodePort.
	ProxyHealthzPort = cloud.KubeProxyHealthzPort
	proxyMetricsPort = 10249
)

// renderProxy renders the node's KubeProxyConfiguration.
func renderProxy(n *Node) ([]byte, error) {
	c := n.Config
	cfg := kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		ClientConnection: componentbaseconfig.ClientConnectionConfiguration{
			Kubeconfig: n.proxyKubeconfig(),
		},
		HostnameOverride:   c.NodeName,
		BindAddress:        "0.0.0.0",
		HealthzBindAddress: "0.0.0.0:" + strconv.Itoa(ProxyHealthzPort),
		MetricsBindAddress: "127.0.0.1:" + strconv.Itoa(proxyMetricsPort),
		Mode:               "iptables",
		ClusterCIDR:        c.ClusterCIDR,
		DetectLocalMode:    "ClusterCIDR",
		// Node ports answer on the node's address only, not on every address of the host.
		NodePortAddresses: []string{"primary"},
		IPTables: kubeproxyv1alpha1.KubeProxyIPTablesConfiguration{
			// Would set net.ipv4.conf.all.route_localnet: node ports on 127.0.0.1 are of no
			// use inside a host.
			LocalhostNodePorts: ptr.To(false),
			MasqueradeAll:      false,
		},
		Conntrack: kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
			// nf_conntrack_max is machine-wide and cannot be set from a host's network
			// namespace: 0 leaves it alone (the per-namespace timeouts are still set).
			MaxPerCore: ptr.To[int32](0),
			Min:        ptr.To[int32](0),
		},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render kube-proxy config: %w", err)
	}
	return append([]byte("# KubeProxyConfiguration of node "+c.NodeName+", written by nephele's node runtime at every boot.\n"), data...), nil
}

// proxyArgs are kube-proxy's flags.
func proxyArgs(n *Node) []string {
	return []string{
		"--config=" + n.Paths.ProxyConfig,
		"--v=" + strconv.Itoa(n.Config.Verbosity),
	}
}
