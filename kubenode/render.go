package kubenode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nephele-dev/nephele/internal/atomicfile"
)

// File is a file the node runtime writes.
type File struct {
	// Path is where it goes.
	Path string
	// Data is its content.
	Data []byte
	// Mode is its permissions.
	Mode os.FileMode
}

// Render renders every configuration file of the node that does not depend on the
// cluster's answer: containerd's config.toml, the KubeletConfiguration, the
// KubeProxyConfiguration, the kubeconfigs made from credentials, and the pods'
// resolv.conf. The CNI configuration waits for the Node's pod CIDR (RenderCNI).
func Render(n *Node) ([]File, error) {
	containerd, err := renderContainerd(n)
	if err != nil {
		return nil, err
	}
	kubelet, err := renderKubelet(n)
	if err != nil {
		return nil, err
	}
	proxy, err := renderProxy(n)
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: n.Paths.ContainerdConfig, Data: containerd, Mode: 0o644},
		{Path: n.Paths.KubeletConfig, Data: kubelet, Mode: 0o644},
		{Path: n.Paths.ProxyConfig, Data: proxy, Mode: 0o644},
		{Path: n.Paths.ResolvConf, Data: renderResolvConf(n), Mode: 0o644},
	}
	for _, k := range []struct {
		user string
		cr   Credentials
		path string
	}{
		{"kubelet", n.Config.Kubelet, n.Paths.KubeletKubeconfig},
		{"kube-proxy", n.Config.KubeProxy, n.Paths.ProxyKubeconfig},
	} {
		data, err := renderKubeconfig(n, k.user, k.cr)
		if err != nil {
			return nil, err
		}
		if data != nil {
			files = append(files, File{Path: k.path, Data: data, Mode: 0o600})
		}
	}
	for _, r := range n.Config.Registries {
		files = append(files, File{Path: filepath.Join(n.Paths.RegistryHosts, r.Host, "hosts.toml"), Data: renderRegistryHosts(n, r), Mode: 0o644})
	}
	slices.SortFunc(files, func(a, b File) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	return files, nil
}

// renderRegistryHosts renders a registry host's hosts.toml: containerd pulls its images
// from r.Endpoint alone, never from the host the references name.
func renderRegistryHosts(n *Node, r Registry) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Where containerd of node %s pulls images named %s/... from, written by nephele's\n# node runtime at every boot: edits are lost.\n", n.Config.NodeName, r.Host)
	fmt.Fprintf(&b, "server = %s\n", tomlString(strings.TrimSuffix(r.Endpoint, "/")))
	fmt.Fprintf(&b, "capabilities = %s\n", tomlList("pull", "resolve"))
	if r.CAFile != "" {
		fmt.Fprintf(&b, "ca = %s\n", tomlString(r.CAFile))
	}
	return []byte(b.String())
}

// RenderCNI renders the node's CNI network configuration for the pod CIDR its Node was
// assigned.
func RenderCNI(n *Node, podCIDR string) (File, error) {
	data, err := renderCNI(n, podCIDR)
	if err != nil {
		return File{}, err
	}
	return File{Path: n.Paths.CNIConflist, Data: data, Mode: 0o644}, nil
}

// write writes f atomically and durably: readers (containerd watches the CNI directory)
// see the old file or the new one, never half of one, and so does the next boot after a
// crash.
func (f File) write() error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return atomicfile.Write(f.Path, f.Data, f.Mode)
}
