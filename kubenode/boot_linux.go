package kubenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
)

// containerdStartTimeout bounds the wait for containerd's socket to answer.
const containerdStartTimeout = time.Minute

// runner is one boot of a node.
type runner struct {
	n   *Node
	log logr.Logger
	ctr ctr

	// inHost is set once the runtime knows it runs in a host's own namespaces; only
	// then does it clean up mounts and iptables chains.
	inHost bool
	cg     *cgroups

	containerd, kubelet, proxy *supervised

	status Status
}

// Boot makes the host it runs in a Kubernetes node and keeps it one until ctx ends: it
// starts containerd, imports the images, starts kubelet, waits for the Node's pod CIDR,
// writes the CNI configuration for it and starts kube-proxy, restarting any of them that
// exits. When ctx ends (SIGTERM) or the boot fails, it stops the node in order: kube-proxy,
// kubelet, the containers kubelet left, containerd, then every process left in the node's
// cgroups, the node's iptables chains, its mounts and cgroups. It returns nil after a
// stop that ctx asked for and that left nothing behind.
//
// It must run as root inside a host: a network and a mount namespace of its own (it
// refuses the machine's), with the node's cgroup root (Config.CgroupRoot) to live in.
//
// Boot logs its progress but not the error it returns, which the caller reports once.
func Boot(ctx context.Context, n *Node, log logr.Logger) error {
	r := newRunner(n, log)
	return r.run(ctx, r.boot)
}

func newRunner(n *Node, log logr.Logger) *runner {
	return &runner{
		n:   n,
		log: log,
		ctr: ctr{path: n.Binaries.Ctr, address: n.Paths.ContainerdSocket, platform: nodePlatform()},
		status: Status{
			Node:     n.Config.NodeName,
			Started:  time.Now(),
			PIDs:     map[string]int{"runtime": os.Getpid()},
			Restarts: map[string]int{},
			Steps:    map[string]Duration{},
		},
	}
}

// run boots the node with boot, then stops it, and returns what failed in either. The
// failures go into the status file; the log only says that the boot failed, so that a
// caller that prints the returned error does not show it twice.
func (r *runner) run(ctx context.Context, boot func(context.Context) error) error {
	bootErr := boot(ctx)
	if bootErr != nil && ctx.Err() != nil {
		bootErr = nil // stopped while booting, as asked
	}
	if bootErr != nil {
		r.status.Error = bootErr.Error()
		r.log.Info("Boot failed; stopping the node")
	}
	return errors.Join(bootErr, r.shutdown())
}

func (r *runner) boot(ctx context.Context) error {
	n := r.n
	if os.Geteuid() != 0 {
		return errors.New("the node runtime must run as root")
	}
	if err := checkNamespaces(); err != nil {
		return err
	}
	r.inHost = true
	if err := n.CheckBinaries(); err != nil {
		return err
	}
	keep, err := n.keepPaths()
	if err != nil {
		return err
	}
	r.setPhase(PhasePreparing)

	// What a previous boot that crashed may have left: processes, cgroups, mounts, rules.
	cg, err := newCgroups(n.Config.CgroupRoot, n.Paths.CgroupMarker)
	if err != nil {
		return err
	}
	r.cg = cg
	if err := cg.ensure(); err != nil {
		return err
	}
	if err := cg.join(); err != nil {
		return err
	}
	if killed, err := cg.killAll(context.Background()); err != nil {
		return fmt.Errorf("processes of an earlier boot: %w", err)
	} else if killed > 0 {
		r.log.Info("Killed the processes an earlier boot left", "count", killed)
	}
	if err := cg.removeChildren(context.Background()); err != nil {
		return fmt.Errorf("cgroups of an earlier boot: %w", err)
	}
	if err := unmountAll(n.Paths.Dir, r.log); err != nil {
		return fmt.Errorf("mounts of an earlier boot: %w", err)
	}
	if err := removeNodeChains(ctx, r.lookPath); err != nil {
		return fmt.Errorf("iptables chains of an earlier boot: %w", err)
	}
	for _, dir := range n.Paths.ephemeral() {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("state of an earlier boot: %w", err)
		}
	}

	if err := privatize(keep, r.log); err != nil {
		return err
	}
	if err := bindNodeDirs(n.Paths.Binds); err != nil {
		return err
	}
	files, err := Render(n)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := f.write(); err != nil {
			return err
		}
	}
	for _, dir := range []string{n.Paths.ContainerdRoot, n.Paths.ContainerdState, n.Paths.ContainerdOpt, n.Paths.RegistryHosts,
		n.Paths.CNIConf, n.Paths.CNIIPAM, n.Paths.KubeletRoot, n.Paths.KubeletCerts, n.Paths.PodLogs, n.Config.StaticPodDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}

	if err := r.startContainerd(ctx); err != nil {
		return err
	}
	r.step("containerdReady")
	r.setPhase(PhaseImages)
	if err := r.importImages(ctx); err != nil {
		return err
	}
	r.step("imagesImported")

	if r.kubelet, err = supervise(r.component("kubelet", n.Binaries.Kubelet, kubeletArgs(n)), r.log); err != nil {
		return err
	}
	r.step("kubeletStarted")
	r.setPhase(PhaseWaitingCIDR)
	rc, err := restConfig(n.kubeletKubeconfig())
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("apiserver client: %w", err)
	}
	cidr, err := r.waitPodCIDR(ctx, client)
	if err != nil {
		return err
	}
	if err := r.writeCNI(cidr); err != nil {
		return err
	}
	r.step("podCIDR")

	if r.proxy, err = supervise(r.component("kube-proxy", n.Binaries.KubeProxy, proxyArgs(n)), r.log); err != nil {
		return err
	}
	r.step("proxyStarted")
	r.setPhase(PhaseRunning)
	r.log.Info("Node is up", "node", n.Config.NodeName, "podCIDR", cidr, "after", time.Since(r.status.Started).Round(time.Millisecond))

	tick := time.NewTicker(podCIDRRecheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := podCIDR(ctx, client, n.Config.NodeName)
		if err != nil {
			r.log.V(1).Info("Could not read the Node", "err", err)
		} else if now != "" && now != r.status.PodCIDR {
			r.log.Info("The Node's pod CIDR changed; rewriting the CNI configuration", "from", r.status.PodCIDR, "to", now)
			if err := r.writeCNI(now); err != nil {
				r.log.Error(err, "Rewriting the CNI configuration")
			}
		}
		r.writeStatus()
	}
}

// path is the components' PATH: the node's binaries and runc first (containerd looks
// its shim up there), then the system's directories, where kubelet, kube-proxy and the
// CNI plugins find iptables and mount.
func (r *runner) path() []string {
	return []string{r.n.Config.BinDir, filepath.Dir(r.n.Binaries.Runc),
		"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}
}

// env is the components' environment: the runtime's, with their PATH.
func (r *runner) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	return append(env, "PATH="+strings.Join(r.path(), ":"))
}

// lookPath finds a program on the components' PATH.
func (r *runner) lookPath(name string) (string, error) {
	for _, dir := range r.path() {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s (install it: hack/install-node-deps.sh)", name, strings.Join(r.path(), ":"))
}

func (r *runner) component(name, path string, args []string) component {
	return component{name: name, path: path, args: args, env: r.env(), logFile: filepath.Join(r.n.Paths.Logs, name+".log")}
}

// startContainerd starts containerd and waits until it answers.
func (r *runner) startContainerd(ctx context.Context) error {
	var err error
	r.containerd, err = supervise(r.component("containerd", r.n.Binaries.Containerd, []string{"--config", r.n.Paths.ContainerdConfig}), r.log)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(containerdStartTimeout)
	for {
		probe, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.ctr.ready(probe)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer within %s (log: %s): %w", containerdStartTimeout, r.containerd.c.logFile, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// importImages imports every image archive and checks that the sandbox image is there,
// unless a registry serves it (containerd pulls it for the first pod).
func (r *runner) importImages(ctx context.Context) error {
	for _, img := range r.n.Config.Images {
		began := time.Now()
		if err := r.ctr.importImage(ctx, img); err != nil {
			return fmt.Errorf("import image %s: %w", img, err)
		}
		r.log.V(1).Info("Image imported", "archive", img, "took", time.Since(began).Round(time.Millisecond))
	}
	if r.n.Config.registryFor(r.n.Config.SandboxImage) != nil {
		return nil
	}
	refs, err := r.ctr.images(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(refs, r.n.Config.SandboxImage) {
		return fmt.Errorf("sandbox image %s is not in the imported images (%s)", r.n.Config.SandboxImage, strings.Join(refs, ", "))
	}
	return nil
}

// waitPodCIDR waits until kube-controller-manager has given the Node a pod CIDR.
func (r *runner) waitPodCIDR(ctx context.Context, client kubernetes.Interface) (string, error) {
	began := time.Now()
	nag := time.Now().Add(podCIDRNag)
	for {
		cidr, err := podCIDR(ctx, client, r.n.Config.NodeName)
		if err == nil && cidr != "" {
			return cidr, nil
		}
		if time.Now().After(nag) {
			r.log.Info("Still waiting for the Node's pod CIDR (is kube-controller-manager running with --allocate-node-cidrs and --cluster-cidr?)",
				"node", r.n.Config.NodeName, "waited", time.Since(began).Round(time.Second), "lastError", err)
			nag = time.Now().Add(podCIDRNag)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(podCIDRPoll):
		}
	}
}

// writeCNI writes the CNI configuration for cidr; containerd picks it up and kubelet turns
// the Node Ready.
func (r *runner) writeCNI(cidr string) error {
	f, err := RenderCNI(r.n, cidr)
	if err != nil {
		return err
	}
	if err := f.write(); err != nil {
		return err
	}
	r.status.PodCIDR = cidr
	r.writeStatus()
	return nil
}

// shutdown stops the node in order and removes what it left, within ShutdownBudget.
func (r *runner) shutdown() error {
	r.setPhase(PhaseStopping)
	began := time.Now()
	var errs []error
	for _, c := range []struct {
		s     *supervised
		grace time.Duration
	}{{r.proxy, proxyGrace}, {r.kubelet, kubeletGrace}} {
		if c.s != nil {
			errs = append(errs, c.s.stop(c.grace))
		}
	}
	if r.containerd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
		if r.ctr.ready(ctx) == nil {
			n, err := r.ctr.removeAll(ctx)
			errs = append(errs, err)
			r.log.V(1).Info("Removed what kubelet left in containerd", "containers", n)
		}
		cancel()
		errs = append(errs, r.containerd.stop(containerdGrace))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if r.cg != nil {
		// containerd's shims and any container process that outlived its task.
		killed, err := r.cg.killAll(ctx)
		errs = append(errs, err)
		if killed > 0 {
			r.log.Info("Killed processes left after containerd stopped", "count", killed)
		}
	}
	if r.inHost {
		errs = append(errs, removeNodeChains(ctx, r.lookPath))
		errs = append(errs, unmountAll(r.n.Paths.Dir, r.log))
		left, err := leftoverMounts(r.n.Paths.Dir)
		errs = append(errs, err)
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("mounts left after unmounting: %s", strings.Join(left, ", ")))
		}
	}
	if r.cg != nil {
		errs = append(errs, r.cg.removeChildren(ctx), r.cg.leave(ctx))
	}
	err := errors.Join(errs...)
	if err != nil && r.status.Error == "" {
		r.status.Error = err.Error()
	}
	r.setPhase(PhaseStopped)
	r.log.Info("Node stopped", "node", r.n.Config.NodeName, "took", time.Since(began).Round(time.Millisecond))
	return err
}

// step records that a boot step is done.
func (r *runner) step(name string) {
	d := time.Since(r.status.Started)
	r.status.Steps[name] = Duration(d)
	r.log.Info("Boot step done", "step", name, "after", d.Round(time.Millisecond))
	r.writeStatus()
}

func (r *runner) setPhase(phase string) {
	r.status.Phase = phase
	r.writeStatus()
}

// writeStatus refreshes the process IDs and writes the status file. A status that cannot
// be written is logged, not fatal: it is a report, not state.
func (r *runner) writeStatus() {
	for name, s := range map[string]*supervised{"containerd": r.containerd, "kubelet": r.kubelet, "kube-proxy": r.proxy} {
		if s == nil {
			continue
		}
		r.status.PIDs[name] = s.pid()
		r.status.Restarts[name] = s.restartCount()
	}
	if err := r.status.write(r.n.Paths.Status); err != nil {
		r.log.V(1).Info("Could not write the node status", "err", err)
	}
}
