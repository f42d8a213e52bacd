package kubenode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/procstat"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// TestBootRealNode boots a real node (containerd, kubelet, kube-proxy) as the boot
// command of a local cloud host (hosts.Machine) against a real control plane, runs a
// pod of the demo image on it, reaches the pod from the machine through a route, kills
// the runtime (the machine boots it again, and it cleans up after the crash), stops the
// host and checks that the node left nothing behind.
func TestBootRealNode(t *testing.T) {
	requireNodePrivileges(t)
	binDir, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	runc := requireNodeBinaries(t, binDir)
	sysctlsBefore := machineSysctls(t)

	env := testenv.New(t, controlplane.Options{
		ControllerManager: true,
		// The node IPAM controller gives each Node a pod CIDR, as kubenet clusters do.
		ControllerManagerArgs: []string{"--allocate-node-cidrs=true", "--cluster-cidr=" + testClusterCIDR, "--node-cidr-mask-size=24"},
	})
	ctx := t.Context()
	dir := t.TempDir()

	platform, err := images.HostPlatform()
	if err != nil {
		t.Fatal(err)
	}
	built, err := images.Build(ctx, images.BuildOptions{ModuleDir: moduleRoot(t), OutDir: filepath.Join(dir, "images"),
		Source: images.Source{Version: "test"}, Platforms: []images.Platform{platform}}, images.Pause, images.DemoHTTP)
	if err != nil {
		t.Fatal(err)
	}

	nodeName := "kubenode-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	kubeletToken := identity(t, env.Client, dir, "kubenode-test-kubelet", "system:node")
	proxyToken := identity(t, env.Client, dir, "kubenode-test-kube-proxy", "system:node-proxier")

	m := openMachine(t, filepath.Join(dir, "hosts"))
	apiserver, err := url.Parse(env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver listens on the machine's loopback, which the host cannot reach; the
	// hosts' gateway is the machine's address on their bridge.
	proxied := testnet.TCPProxy(t, netip.AddrPortFrom(m.Gateway(), 0), apiserver.Host)

	// The node's name, address, directory and cgroup come from the host, as on a real node.
	cfg := Config{
		APIVersion: APIVersion,
		Kind:       Kind,
		BinDir:     binDir,
		Runc:       runc,
		// The serving certificate names localhost and 127.0.0.1, not the proxy's address.
		APIServer:    APIServer{URL: "https://" + proxied.String(), CAFile: env.CAFile(), TLSServerName: "localhost"},
		Kubelet:      Credentials{TokenFile: kubeletToken},
		KubeProxy:    Credentials{TokenFile: proxyToken},
		ClusterCIDR:  testClusterCIDR,
		Images:       []string{built[0].Archive, built[1].Archive},
		SandboxImage: built[0].Ref,
		Verbosity:    1,
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}

	// The host's boot command: the test binary is the runtime (TestMain); or, with
	// $NEPHELE_KUBENODE_TEST_NEPHELE, a nephele binary's `nephele node boot`, to check the
	// command and measure the real binary.
	spec := hosts.HostSpec{ID: "i-00000000000a", Name: nodeName, Address: testNodeIP,
		BootCommand: []string{selfPath(t)}, Env: map[string]string{bootConfigEnv: cfgPath}}
	if nephele := os.Getenv("NEPHELE_KUBENODE_TEST_NEPHELE"); nephele != "" {
		spec.BootCommand, spec.Env = []string{nephele, "node", "boot", "--config", cfgPath, "-v", "1"}, nil
	}
	hostDir := m.HostDir(spec.ID)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of the boot log:\n%s", tail(m.LogPath(spec.ID), 40))
			for _, name := range []string{"containerd", "kubelet", "kube-proxy"} {
				t.Logf("end of %s.log:\n%s", name, tail(filepath.Join(hostDir, "node", "logs", name+".log"), 40))
			}
		}
	})
	began := time.Now()
	if err := m.Start(ctx, spec); err != nil {
		t.Fatalf("starting the host: %v", err)
	}
	host, _ := m.Status(spec.ID)

	// The Node registers as an external cloud provider's node does.
	var node *corev1.Node
	poll.EventuallyContext(t, "the Node to register", func(ctx context.Context) error {
		node, err = env.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return err
	})
	registered := time.Since(began)
	if !hasTaint(node, cloudproviderapi.TaintExternalCloudProvider) {
		t.Errorf("Node %s registered without the taint %s: %v", nodeName, cloudproviderapi.TaintExternalCloudProvider, node.Spec.Taints)
	}
	if got := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; got != testNodeIP.String() {
		t.Errorf("annotation %s = %q, want %s", cloudproviderapi.AnnotationAlphaProvidedIPAddr, got, testNodeIP)
	}
	if node.Spec.ProviderID != "" {
		t.Errorf("provider ID %q set before a cloud-controller-manager ran", node.Spec.ProviderID)
	}

	// Ready once the pod CIDR is set and the CNI configuration written for it.
	poll.EventuallyContext(t, "the Node to be Ready", func(ctx context.Context) error {
		node, err = env.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not Ready; pod CIDR %q", node.Spec.PodCIDR)
	})
	ready := time.Since(began)
	podCIDR := node.Spec.PodCIDR
	poll.Eventually(t, "the runtime to say in the host's boot log that the node is up", func() error {
		if log := bootLog(m, spec.ID, ""); !strings.Contains(log, "Node is up") {
			return fmt.Errorf("it holds:\n%s", log)
		}
		return nil
	})
	conflist, err := os.ReadFile(filepath.Join(hostDir, "node", "cni", "net.d", "10-nephele.conflist"))
	if err != nil || !strings.Contains(string(conflist), `"subnet": "`+podCIDR+`"`) {
		t.Errorf("CNI configuration for %s: %v\n%s", podCIDR, err, conflist)
	}

	if log, err := os.ReadFile(filepath.Join(hostDir, "node", "logs", "containerd.log")); err != nil || strings.Contains(string(log), "Configuration migrated") {
		t.Errorf("containerd's log: %v; the configuration must be in containerd's current format:\n%s", err, log)
	}

	// A pod of the demo image answers from its pod IP, through a route to the node.
	pod := demoPod(nodeName, built[1].Ref)
	poll.EventuallyContext(t, "the pod to be created", func(ctx context.Context) error {
		// Admission refuses pods until kube-controller-manager made the default service account.
		_, err := env.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	podCreated := time.Now()
	if err := m.SetRoutes(ctx, []hosts.Route{{Destination: netip.MustParsePrefix(podCIDR), Via: testNodeIP}}); err != nil {
		t.Fatalf("routing the pod CIDR to the node: %v", err)
	}
	pod = servingPod(t, env.Client, pod, nodeName)
	podReady := time.Since(podCreated)

	// The pod resolves with nothing outside the machine.
	resolv, _ := filepath.Glob(filepath.Join(hostDir, "node", "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes", "*", "resolv.conf"))
	if len(resolv) == 0 {
		t.Error("no pod sandbox resolv.conf found")
	}
	for _, f := range resolv {
		if data, err := os.ReadFile(f); err != nil || !strings.Contains(string(data), "nameserver 127.0.0.1") || strings.Count(string(data), "nameserver") != 1 {
			t.Errorf("pod resolv.conf %s: %v\n%s", f, err, data)
		}
	}

	status, err := ReadStatus(filepath.Join(hostDir, "node", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	if status.Phase != PhaseRunning || status.PodCIDR != podCIDR {
		t.Errorf("status: phase %s, pod CIDR %s; want %s, %s", status.Phase, status.PodCIDR, PhaseRunning, podCIDR)
	}
	// The runtime reports PIDs as the host sees them: a PID namespace of its own.
	hostStatus, _ := m.Status(spec.ID)
	machine, err := procstat.ByInnerPID(hostStatus.MountNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"runtime", "containerd", "kubelet", "kube-proxy"} {
		pid, ok := machine[status.PIDs[name]]
		if !ok {
			t.Errorf("%s: no process %d in the host", name, status.PIDs[name])
		}
		t.Logf("RSS %-10s %6.1f MiB (pid %d, %d in the host)", name, rssMiB(pid), pid, status.PIDs[name])
	}
	for _, step := range []string{"containerdReady", "imagesImported", "kubeletStarted", "podCIDR", "proxyStarted"} {
		t.Logf("boot step %-16s after %s", step, time.Duration(status.Steps[step]).Round(time.Millisecond))
	}
	t.Logf("Node registered after %s, Ready after %s; pod Ready %s after creation",
		registered.Round(time.Millisecond), ready.Round(time.Millisecond), podReady.Round(time.Millisecond))
	if got := machineSysctls(t); got != sysctlsBefore {
		t.Errorf("machine sysctls changed while the node ran:\n%s\nbefore:\n%s", got, sysctlsBefore)
	}

	// A crash: the host's init is killed, and the runtime with it; the host boots again, in
	// the same namespaces, where the first boot's mounts are left. The second boot
	// cleans up after the first and serves again.
	first, _ := m.Status(spec.ID)
	if err := syscall.Kill(first.BootPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rebooting := time.Now()
	poll.Eventually(t, "the node to run again", func() error {
		st, _ := m.Status(spec.ID)
		s, err := ReadStatus(filepath.Join(hostDir, "node", "status.json"))
		if err != nil {
			return err
		}
		// The runtime is the boot command, the child of the host's init (the boot process).
		machine, _ := procstat.ByInnerPID(st.MountNS)
		runtime := machine[s.PIDs["runtime"]]
		if st.Boots != 2 || st.BootPID == 0 || s.Phase != PhaseRunning {
			return fmt.Errorf("host %+v; runtime %d in phase %s", st, s.PIDs["runtime"], s.Phase)
		}
		if p, err := procstat.Read(runtime); err != nil || p.PPID != st.BootPID {
			return fmt.Errorf("the runtime (%d in the host, %d on the machine) is not the child of the boot process %d: %+v %v", s.PIDs["runtime"], runtime, st.BootPID, p, err)
		}
		return nil
	})
	pod = servingPod(t, env.Client, pod, nodeName)
	t.Logf("after a crash, the node serves the pod again %s after it was killed", time.Since(rebooting).Round(time.Millisecond))
	if !strings.Contains(bootLog(m, spec.ID, "boot 2: "), "Unmounted the node's mounts") {
		t.Errorf("the boot after the crash found none of the first boot's mounts: the crash test tests nothing:\n%s", bootLog(m, spec.ID, "boot 2: "))
	}

	// Stop: the host's stop asks the runtime to take the node down; it does, in time, and
	// exits cleanly, leaving nothing in the host for the host to kill. The observer keeps
	// the host's namespaces for a look after.
	watch := observe(t, host)
	stopping := time.Now()
	if err := m.Stop(ctx, spec.ID); err != nil {
		t.Fatalf("stopping the host: %v", err)
	}
	took := time.Since(stopping)
	t.Logf("node stopped in %s; the end of the boot log:\n%s", took.Round(time.Millisecond), tail(m.LogPath(spec.ID), 15))
	if st, _ := m.Status(spec.ID); st.LastExit != "exit status 0" || took >= ShutdownBudget {
		t.Errorf("the runtime ended with %q after %s; want exit status 0 within %s", st.LastExit, took, ShutdownBudget)
	}
	// Either the host's init says what the runtime left (they die with it) or the
	// stop says what it killed.
	if log := bootLog(m, spec.ID, "boot 2: "); strings.Contains(log, "processes left in it") || strings.Contains(log, "they end with the host's init") {
		t.Errorf("the node left processes in the host for the host's stop to kill:\n%s", log)
	}
	s, err := ReadStatus(filepath.Join(hostDir, "node", "status.json"))
	if err != nil || s.Phase != PhaseStopped || s.Error != "" {
		t.Errorf("status after the stop: %+v, %v", s, err)
	}
	if left := watch.processes(); len(left) > 0 {
		t.Errorf("processes left in the host: %v", describe(left))
	}
	for _, mnt := range watch.mounts(t) {
		if mnt.Source == privateSource || under(mnt.Point, filepath.Join(hostDir, "node")) {
			t.Errorf("mount left in the host: %s (%s %s)", mnt.Point, mnt.FSType, mnt.Source)
		}
	}
	if links := watch.run(t, "ip", "-o", "link", "show", "type", "veth"); strings.TrimSpace(links) != "" {
		t.Errorf("pod veths left in the host (their network namespaces live on):\n%s", links)
	}
	if rules := watch.run(t, "iptables-save"); strings.Contains(rules, "KUBE-") || strings.Contains(rules, "CNI-") {
		t.Errorf("node iptables chains left in the host:\n%s", rules)
	}
	if dirs := cgroupDirs(t, host.Cgroup); len(dirs) > 0 {
		t.Errorf("cgroups left: %v", dirs)
	}
	if got := machineSysctls(t); got != sysctlsBefore {
		t.Errorf("machine sysctls changed:\n%s\nbefore:\n%s", got, sysctlsBefore)
	}
	watch.p.Kill()
}

// servingPod waits until pod is Ready and answers HTTP on its pod IP from the machine,
// naming itself and its node, and returns it as it is then.
func servingPod(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, node string) *corev1.Pod {
	t.Helper()
	poll.EventuallyContext(t, "the pod to be Ready", func(ctx context.Context) error {
		var err error
		pod, err = client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %v, containers %v", pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
	})
	var answer struct{ Pod, Node, PodIP string }
	http := &http.Client{Timeout: 2 * time.Second}
	poll.Eventually(t, "the pod to answer HTTP from the machine", func() error {
		resp, err := http.Get("http://" + pod.Status.PodIP + ":8080/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&answer)
	})
	if answer.Pod != pod.Name || answer.Node != node || answer.PodIP != pod.Status.PodIP {
		t.Errorf("the pod answered %+v, want pod %s on node %s at %s", answer, pod.Name, node, pod.Status.PodIP)
	}
	return pod
}

// requireNodePrivileges fails the test, never skips it, where a real node cannot run.
func requireNodePrivileges(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("real nodes need root (network and mount namespaces, cgroups, iptables): run the tests as root")
	}
}

// requireNodeBinaries fails the test when a program a node runs is missing, and
// returns runc's path.
func requireNodeBinaries(t *testing.T, binDir string) string {
	t.Helper()
	n := &Node{Binaries: Binaries{
		Containerd: filepath.Join(binDir, "containerd"), Shim: filepath.Join(binDir, "containerd-shim-runc-v2"),
		Ctr: filepath.Join(binDir, "ctr"), Kubelet: filepath.Join(binDir, "kubelet"),
		KubeProxy: filepath.Join(binDir, "kube-proxy"), CNI: filepath.Join(binDir, "cni"),
	}}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatalf("runc is not installed: run hack/install-node-deps.sh (make node-deps): %v", err)
	}
	n.Binaries.Runc = runc
	if err := n.CheckBinaries(); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run hack/install-node-deps.sh: %v", tool, err)
		}
	}
	return runc
}

// moduleRoot is the nephele module's root, for building the images.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// identity makes a service account bound to clusterRole, and writes a token for it to a
// file: the test's stand-in for a node's client certificate, which the test control
// plane cannot verify (its apiserver has no client CA).
func identity(t *testing.T, client kubernetes.Interface, dir, name, clusterRole string) string {
	t.Helper()
	ctx := t.Context()
	const ns = "kube-system"
	sa, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// demoPod is a pod of the demo image bound to node, tolerating the taints of a node that
// no cloud-controller-manager initialized.
func demoPod(node, image string) *corev1.Pod {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-" + node, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            "demo",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"),
					field("POD_IP", "status.podIP"), field("NODE_NAME", "spec.nodeName")},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// machineSysctls reads the machine-wide sysctls kubelet wants to change.
func machineSysctls(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for name := range kubeletSysctls {
		v, err := os.ReadFile("/proc/sys/" + name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%s", name, v)
	}
	lines := strings.SplitAfter(b.String(), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// rssMiB is a process's resident memory in MiB, 0 if it is gone.
func rssMiB(pid int) float64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// describe names processes by their command lines.
func describe(pids []int) []string {
	var out []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return out
}

// tail returns the end of a file, for a failed test's log.
func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
