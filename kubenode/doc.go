// Package kubenode is the node runtime of nephele's real nodes: what runs inside a local
// cloud host (a network namespace and a mount namespace on one machine) to make it a
// Kubernetes node, in the role that kubeadm's configuration and systemd units play on a
// real machine.
//
// A node is described by a configuration file (Config, read by `nephele node boot
// --config FILE`) whose host-specific fields default to the environment a host gives its
// boot command (NEPHELE_INSTANCE_NAME, NEPHELE_INSTANCE_ADDRESS, NEPHELE_HOST_DIR,
// NEPHELE_HOST_CGROUP). Complete checks it; Render writes containerd's config.toml, the
// KubeletConfiguration, the KubeProxyConfiguration, kubeconfigs and the pods' resolv.conf;
// RenderCNI writes the bridge + host-local + portmap network for the Node's pod CIDR.
//
// Boot runs the node: containerd (with its own root, state, sockets and runc root), the
// images imported from OCI archives (there is no registry), kubelet with
// --cloud-provider=external (so the Node registers tainted uninitialized, for nephele's
// cloud-controller-manager), then, once kube-controller-manager has allocated the Node a
// pod CIDR, the CNI configuration for it (kubenet-style: the Node stays NotReady until
// then) and kube-proxy in iptables mode. Each is restarted with backoff when it exits. On
// stop it takes the node down in order, within ShutdownBudget (a host must allow that
// long; the local cloud's default stop timeout does), and removes what it started and
// changed: its processes, containers, iptables chains, mounts and cgroups. What its
// components change in the host's own network namespace (the CNI bridge cni0, its
// routes, ip_forward) stays until the host stops: that namespace goes with the host.
//
// Where it differs from a node on a machine of its own, and why:
//
//   - /run, /var/lib and /var/log are fresh tmpfs in the host's mount namespace, so the
//     fixed paths of kubelet, containerd and runc are the node's own, and paths the node
//     needs under them are bound back in. kubelet's and containerd's roots (in the host
//     directory) are bound to /var/lib/kubelet and /var/lib/containerd, and containerd's
//     state is on the node's /run: every socket path is short and fixed, whatever the
//     host directory's (Paths).
//   - kubelet would set six machine-wide sysctls (vm.overcommit_memory, kernel.panic,
//     kernel.panic_on_oops, ...). The runtime binds files with kubelet's values over
//     them inside the host's mount namespace and runs kubelet with protectKernelDefaults,
//     so kubelet is satisfied and the machine keeps its own values: nothing to restore,
//     even after a crash.
//   - containerd restricts oom_score_adj and kubelet keeps 0: the machine may lack
//     CAP_SYS_RESOURCE.
//   - Image garbage collection is off: imported images cannot be pulled again.
//   - The resolv.conf kubelet gives pods of DNS policy Default names the cluster DNS
//     servers (localcluster gives CoreDNS's Service, whose Corefile forwards nothing), or
//     the pod's own loopback when there are none: no lookup leaves the machine.
package kubenode
