package kubenode

import (
	"fmt"
	"path/filepath"
)

// nodeSubdir is the subdirectory of the host directory that is the node's: the host
// (the local cloud) may keep files of its own beside it.
const nodeSubdir = "node"

// maxSocketPath is the longest unix socket path containerd accepts: 104 bytes, the
// portable limit (BSD's sun_path less its NUL) that containerd enforces on every platform,
// below Linux's 107. A longer one makes containerd exit at once ("unix socket path too
// long (> 104)").
const maxSocketPath = 104

// Paths are the files and directories of one node, all under HostDir/node. State that
// does not outlive a boot (containerd's state, the CNI configuration and address
// allocations) is removed when the node boots; the rest persists like a disk.
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

	ContainerdConfig string // containerd's config.toml
	ContainerdRoot   string // containerd's root: content store, snapshots, metadata
	ContainerdState  string // containerd's state: sockets, shim bundles, pod netns mounts
	ContainerdSocket string // containerd's gRPC socket
	RuncRoot         string // runc's state directory
	ContainerdOpt    string // containerd's opt directory
	RegistryHosts    string // containerd's registry hosts directory (config_path)

	CNIConf     string // the CNI configuration directory
	CNIIPAM     string // host-local's allocations
	CNIConflist string // the network configuration file written once the pod CIDR is known

	KubeletConfig     string // KubeletConfiguration
	KubeletKubeconfig string
	KubeletRoot       string // kubelet --root-dir
	KubeletCerts      string // kubelet --cert-dir
	PodLogs           string // kubelet podLogsDir
	ResolvConf        string // the resolv.conf pods get

	ProxyConfig     string // KubeProxyConfiguration
	ProxyKubeconfig string
}

func newPaths(hostDir string) Paths {
	dir := filepath.Join(hostDir, nodeSubdir)
	cfg := filepath.Join(dir, "config")
	state := filepath.Join(dir, "containerd", "state")
	cni := filepath.Join(dir, "cni")
	return Paths{
		Dir:          dir,
		Config:       cfg,
		Logs:         filepath.Join(dir, "logs"),
		Status:       filepath.Join(dir, "status.json"),
		CgroupMarker: filepath.Join(dir, "cgroups-created"),

		ContainerdConfig: filepath.Join(cfg, "containerd.toml"),
		ContainerdRoot:   filepath.Join(dir, "containerd", "root"),
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
		KubeletRoot:       filepath.Join(dir, "kubelet"),
		KubeletCerts:      filepath.Join(dir, "kubelet-pki"),
		PodLogs:           filepath.Join(dir, "pod-logs"),
		ResolvConf:        filepath.Join(cfg, "resolv.conf"),

		ProxyConfig:     filepath.Join(cfg, "kube-proxy.yaml"),
		ProxyKubeconfig: filepath.Join(cfg, "kube-proxy.kubeconfig"),
	}
}

// CheckHostDir says whether a node can run in hostDir: an error when its sockets' paths
// would be longer than containerd accepts. A cluster checks its hosts' directories with
// it before it creates any.
func CheckHostDir(hostDir string) error { return newPaths(hostDir).check() }

// check refuses a host directory whose socket paths containerd cannot take.
func (p Paths) check() error {
	// containerd also listens on <socket>.ttrpc.
	if l := len(p.ContainerdSocket + ".ttrpc"); l > maxSocketPath {
		return fmt.Errorf("hostDir: %s is too long: containerd's socket %s.ttrpc would be %d bytes, over the %d containerd takes; use a shorter directory",
			filepath.Dir(p.Dir), p.ContainerdSocket, l, maxSocketPath)
	}
	return nil
}

// ephemeral are the directories removed at boot: what a machine loses when it restarts.
func (p Paths) ephemeral() []string {
	return []string{p.ContainerdState, p.CNIConf, p.CNIIPAM}
}
