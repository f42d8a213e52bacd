package kubenode

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Ports of kubelet inside the host's network namespace: the defaults, since each host has
// its own.
const (
	kubeletPort        = 10250
	kubeletHealthzPort = 10248
)

// renderKubelet renders the node's KubeletConfiguration.
func renderKubelet(n *Node) ([]byte, error) {
	c := n.Config
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},

		ContainerRuntimeEndpoint: "unix://" + n.Paths.ContainerdSocket,
		// The machine has no systemd; containerd runs runc with SystemdCgroup = false.
		CgroupDriver: "cgroupfs",
		// Each node has its own subtree, so the nodes' pods (kubepods) do not collide.
		CgroupRoot: c.CgroupRoot,
		// kubelet 1.36 refuses cgroup v1 unless told; machines like this one are v1 hybrid.
		FailCgroupV1: ptr.To(false),
		FailSwapOn:   ptr.To(false),

		StaticPodPath:  c.StaticPodDir,
		PodLogsDir:     n.Paths.PodLogs,
		ResolverConfig: ptr.To(n.Paths.ResolvConf),
		ClusterDomain:  c.ClusterDomain,
		ClusterDNS:     slices.Clone(c.ClusterDNS),

		Address:            n.IP.String(),
		Port:               kubeletPort,
		ReadOnlyPort:       0,
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To[int32](kubeletHealthzPort),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: c.APIServer.CAFile},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},

		// Images are imported, not pulled: garbage collection would delete them for good.
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		// Every node sees the whole machine's disk, often fuller than a dedicated node's:
		// lower disk thresholds keep a busy laptop from evicting every pod at once.
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "5%",
			"nodefs.inodesFree": "5%",
			"imagefs.available": "5%",
		},

		// kubelet would set vm.overcommit_memory, kernel.panic, kernel.panic_on_oops (and
		// check three more) on the whole machine. The runtime shows it the values it wants
		// inside the host's mount namespace instead; should that ever fail, kubelet stops
		// with an error rather than change the machine.
		ProtectKernelDefaults: true,
		// kubelet cannot lower its own oom_score_adj without CAP_SYS_RESOURCE, and on a
		// shared machine it should not outrank the user's programs anyway.
		OOMScoreAdj: ptr.To[int32](0),

		// Pods are deleted with the cluster; graceful node shutdown needs systemd's inhibitors.
		ShutdownGracePeriod:             metav1.Duration{Duration: 0},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: 0},
		NodeStatusReportFrequency:       metav1.Duration{Duration: time.Minute},
		RegisterNode:                    ptr.To(true),
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubelet config: %w", err)
	}
	return append([]byte("# KubeletConfiguration of node "+c.NodeName+", written by nephele's node runtime at every boot.\n"), data...), nil
}

// kubeletArgs are kubelet's flags: what KubeletConfiguration cannot say.
func kubeletArgs(n *Node) []string {
	c := n.Config
	args := []string{
		"--config=" + n.Paths.KubeletConfig,
		"--kubeconfig=" + n.kubeletKubeconfig(),
		"--root-dir=" + n.Paths.KubeletRoot,
		// The default (/var/lib/kubelet/pki) is not under --root-dir.
		"--cert-dir=" + n.Paths.KubeletCerts,
		"--hostname-override=" + c.NodeName,
		"--node-ip=" + n.IP.String(),
		// Registers the Node with the node.cloudprovider.kubernetes.io/uninitialized
		// taint and no provider ID: nephele's cloud-controller-manager initializes it.
		"--cloud-provider=external",
		"--v=" + strconv.Itoa(c.Verbosity),
	}
	if len(c.NodeLabels) > 0 {
		labels := make([]string, 0, len(c.NodeLabels))
		for _, k := range slices.Sorted(maps.Keys(c.NodeLabels)) {
			labels = append(labels, k+"="+c.NodeLabels[k])
		}
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	return args
}
