package kubenode

import (
	"path/filepath"
)

// nodeSubdir is the subdirectory of the host directory that is the node's: the host
// (the local cloud) may keep files of its own beside it.
const nodeSubdir = "node"

// Where a node sees its own runtime state: the standard paths of a machine, inside the
// node's mount namespace. They are short and fixed whatever the host directory's path:
// the unix sockets under them (containerd's gRPC and ttrpc sockets, kubelet's
// pod-resources and plugin registration sockets, CSI drivers' sockets) must stay under
// the kernel's 107 bytes, and containerd's own 104, which a host directory under a long
// checkout path would pass.
const (
	// inNodeKubeletRoot is kubelet's --root-dir, bound from HostDir/node/kubelet.
	inNodeKubeletRoot = "/var/lib/kubelet"
	// inNodeContainerdRoot is containerd's root, bound from HostDir/node/containerd/root.
	inNodeContainerdRoot = "/var/lib/containerd"
	// inNodeContainerdState is containerd's state: on the node's own /run, a fresh tmpfs
	// every boot, as on a machine that just started.
	inNodeContainerdState = "/run/containerd"
)

// Bind is a directory of the node's host directory that the node sees at a standard path
// of a machine (Target), bound there in its mount namespace when it boots.
type Bind struct {
	Source, Target string
	// Shared makes the bind a shared mount (in a peer group of the node's own, never
	// the machine's): mounts made under it inside a container come back to the node.
	// kubelet's root is shared, as on a machine with systemd, so that a CSI node plugin's
	// volume mounts (mountPropagation: Bidirectional, which the container runtime
	// refuses on a mount that is not shared) reach kubelet and the pods.
	Shared bool
}

// Paths are the files and directories of one node. Those outside the node (Dir and what
// is under it) are under HostDir/node and persist like a disk; inside the node,
// kubelet's root and containerd's root are seen at their standard paths through Binds,
// and containerd's state is on the node's own /run. State that does not outlive a boot
// (containerd's state, the CNI configuration and address allocations) starts empty at
// every boot.
type Paths struct {
	// Dir is HostDir/node.
	Dir string
	// Config holds the rendered configuration files.
	Config string
	// Logs holds one log file per component.
	Logs string
	// Status is the file the runner reports its phase and processes in.
	Status string
	// CgroupMarker records the cgroups the runtime created, to remove them even after
	// a crash.
	CgroupMarker string

	// Binds are the directories of Dir the node sees at a standard path (kubelet's and
	// containerd's roots).
	Binds []Bind

	ContainerdConfig string // containerd's config.toml
	ContainerdRoot   string // containerd's root: content store, snapshots, metadata (in the node)
	ContainerdState  string // containerd's state: sockets, shim bundles, pod netns mounts (in the node)
	ContainerdSocket string // containerd's gRPC socket (in the node)
	RuncRoot         string // runc's state directory
	ContainerdOpt    string // containerd's opt directory
	RegistryHosts    string // containerd's registry hosts directory (config_path)

	CNIConf     string // the CNI configuration directory
	CNIIPAM     string // host-local's allocations
	CNIConflist string // the network configuration file written once the pod CIDR is known

	KubeletConfig     string // KubeletConfiguration
	KubeletKubeconfig string
	KubeletRoot       string // kubelet --root-dir (in the node)
	KubeletCerts      string // kubelet --cert-dir
	PodLogs           string // kubelet podLogsDir
	ResolvConf        string // the resolv.conf pods get

	ProxyConfig     string // KubeProxyConfiguration
	ProxyKubeconfig string
}

func newPaths(hostDir string) Paths {
	dir := filepath.Join(hostDir, nodeSubdir)
	cfg := filepath.Join(dir, "config")
	state := inNodeContainerdState
	cni := filepath.Join(dir, "cni")
	return Paths{
		Dir: dir,
		Binds: []Bind{
			{Source: filepath.Join(dir, "kubelet"), Target: inNodeKubeletRoot, Shared: true},
			{Source: filepath.Join(dir, "containerd", "root"), Target: inNodeContainerdRoot},
		},
		Config:       cfg,
		Logs:         filepath.Join(dir, "logs"),
		Status:       filepath.Join(dir, "status.json"),
		CgroupMarker: filepath.Join(dir, "cgroups-created"),

		ContainerdConfig: filepath.Join(cfg, "containerd.toml"),
		ContainerdRoot:   inNodeContainerdRoot,
		ContainerdState:  state,
		ContainerdSocket: filepath.Join(state, "containerd.sock"),
		RuncRoot:         filepath.Join(state, "runc"),
		ContainerdOpt:    filepath.Join(dir, "containerd", "opt"),
		RegistryHosts:    filepath.Join(cfg, "registry-hosts"),

		CNIConf:     filepath.Join(cni, "net.d"),
		CNIIPAM:     filepath.Join(cni, "ipam"),
		CNIConflist: filepath.Join(cni, "net.d", "10-nephele.conflist"),

		KubeletConfig:     filepath.Join(cfg, "kubelet.yaml"),
		KubeletKubeconfig: filepath.Join(cfg, "kubelet.kubeconfig"),
		KubeletRoot:       inNodeKubeletRoot,
		KubeletCerts:      filepath.Join(dir, "kubelet-pki"),
		PodLogs:           filepath.Join(dir, "pod-logs"),
		ResolvConf:        filepath.Join(cfg, "resolv.conf"),

		ProxyConfig:     filepath.Join(cfg, "kube-proxy.yaml"),
		ProxyKubeconfig: filepath.Join(cfg, "kube-proxy.kubeconfig"),
	}
}

// ephemeral are the directories of Dir removed at boot: what a machine loses when it
// restarts. (containerd's state is on the node's /run, a new tmpfs every boot; it is
// never removed from outside the node, where /run is the machine's.)
func (p Paths) ephemeral() []string {
	return []string{p.CNIConf, p.CNIIPAM}
}
