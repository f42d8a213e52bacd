package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/waitfor"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// Bounds of Stop's waits.
const (
	// podDeleteTimeout is how long pods have to go after a graceful delete; pods still
	// there then are deleted at once (their node stops next and removes what they left).
	podDeleteTimeout = time.Minute
	// nodeStopTimeout bounds stopping the nodes: the cloud kills what a node runtime has
	// not stopped by hostStopTimeout.
	nodeStopTimeout = hostStopTimeout + 30*time.Second
)

// Stop takes the cluster down in the order that leaves the machine as it was (see the
// package documentation) and keeps the logs in Config.Dir. It goes on after a failed
// step and returns every failure. It is safe to call more than once, also on a cluster
// whose Start failed.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() { c.stopErr = c.stop(ctx) })
	return c.stopErr
}

func (c *Cluster) stop(ctx context.Context) error {
	var errs []error
	step := func(name string, fn func(context.Context) (string, error)) {
		errs = append(errs, c.cfg.Progress.Step(ctx, name, fn))
	}
	if c.CCM != nil {
		step("stop cloud-controller-manager", stopProcs(c.CCM))
	}
	if c.Env != nil {
		// Nothing may recreate or reschedule the pods deleted next.
		var ctrl []*controlplane.Process
		for _, p := range c.Env.Processes() {
			if strings.HasPrefix(p.Name(), "kube-controller-manager") || p.Name() == "kube-scheduler" {
				ctrl = append(ctrl, p)
			}
		}
		if len(ctrl) > 0 {
			step("stop kube-controller-manager and kube-scheduler", stopProcs(ctrl...))
		}
		if len(c.Nodes) > 0 && c.cfg.NodeMode == NodesReal {
			step("delete every pod through the API", c.deletePods)
		}
	}
	if c.Cloud != nil && len(c.Nodes) > 0 && c.cfg.NodeMode == NodesReal {
		step("stop "+plural(len(c.Nodes), "node"), c.stopNodes)
	}
	if c.agent != nil {
		step("stop the node agent", c.stopNodeAgent)
	}
	if c.Env != nil {
		name := "stop etcd and kube-apiserver"
		if c.cfg.NodeMode == NodesKwok {
			name = "stop etcd, kube-apiserver and kwok"
		}
		step(name, func(context.Context) (string, error) {
			return "", c.Env.StopKeepingLogs()
		})
	}
	if c.Registry != nil {
		step("stop the image registry", func(ctx context.Context) (string, error) {
			return "", c.Registry.Close(ctx)
		})
	}
	if c.registryLog != nil {
		errs = append(errs, c.registryLog.Close())
	}
	if c.Second != nil && c.Second.proc != nil {
		step("stop the second local cloud", stopProcs(c.Second.proc))
	}
	if c.cloudProc != nil {
		step("stop the local cloud", stopProcs(c.cloudProc))
	}
	if c.cfg.NodeMode == NodesReal {
		step("remove the hosts, keeping the nodes' logs", c.removeHosts)
	}
	return errors.Join(errs...)
}

// stopProcs stops processes with SIGTERM, then SIGKILL after their grace period.
func stopProcs(procs ...*controlplane.Process) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		var errs []error
		for _, p := range procs {
			errs = append(errs, p.Stop())
		}
		return "", errors.Join(errs...)
	}
}

// deletePods deletes every pod through the API and waits until they are gone, so that
// each kubelet stops its containers and the CNI releases their addresses and veths while
// the node still runs. Pods of a node that is not Ready (its kubelet would never confirm)
// and pods still there after podDeleteTimeout are deleted at once.
func (c *Cluster) deletePods(ctx context.Context) (string, error) {
	pods, err := c.Env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	if len(pods.Items) == 0 {
		return "none", nil
	}
	ready := map[string]bool{}
	if nodes, err := c.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for i := range nodes.Items {
			ready[nodes.Items[i].Name] = IsReady(&nodes.Items[i])
		}
	}
	var errs []error
	for _, p := range pods.Items {
		var opts metav1.DeleteOptions
		if !ready[p.Spec.NodeName] {
			opts.GracePeriodSeconds = ptr.To[int64](0)
		}
		if err := c.Env.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	var left []corev1.Pod
	waitErr := waitfor.Condition(ctx, podDeleteTimeout, func(ctx context.Context) error {
		l, err := c.Env.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left = l.Items
		if len(left) > 0 {
			return fmt.Errorf("%d pods left", len(left))
		}
		return nil
	})
	detail := plural(len(pods.Items), "pod") + " deleted"
	if waitErr != nil {
		for _, p := range left {
			err := c.Env.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete pod %s/%s at once: %w", p.Namespace, p.Name, err))
			}
		}
		detail += fmt.Sprintf(", %d at once after %s", len(left), podDeleteTimeout)
	}
	return detail, errors.Join(errs...)
}

// stopNodes stops every running node's instance through the cloud, all at once: each
// node runtime takes its node down and removes what it made, then the cloud removes the
// host's namespaces and cgroup. The hosts' directories stay, with the logs.
func (c *Cluster) stopNodes(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeStopTimeout)
	defer cancel()
	var (
		mu      sync.Mutex
		errs    []error
		stopped []string
		gone    []string
		wg      sync.WaitGroup
	)
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.cloudOf(n).Client
			inst, err := cl.GetInstance(ctx, n.InstanceID)
			if err == nil && inst.State == api.InstanceRunning {
				_, err = cl.StopInstance(ctx, n.InstanceID)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, cloud.ErrNotFound) || err == nil && inst.State != api.InstanceRunning:
				gone = append(gone, n.Name)
			case err != nil:
				errs = append(errs, fmt.Errorf("stop node %s (%s): %w", n.Name, n.InstanceID, err))
			default:
				stopped = append(stopped, n.Name)
			}
		}()
	}
	wg.Wait()
	sort.Strings(stopped)
	detail := strings.Join(stopped, ", ")
	if len(gone) > 0 {
		sort.Strings(gone)
		detail += " (not running: " + strings.Join(gone, ", ") + ")"
	}
	return detail, errors.Join(errs...)
}

// removeHosts keeps each node's logs in Dir/nodes/<name>/ and removes the hosts from the
// machine and their directories (Cleanup).
func (c *Cluster) removeHosts(ctx context.Context) (string, error) {
	var kept []string
	for _, n := range c.Nodes {
		dir := hosts.HostDir(c.cloudOf(n).hostDir, n.InstanceID)
		if _, err := os.Stat(dir); err != nil {
			continue // terminated: the cloud removed it
		}
		dst := filepath.Join(c.cfg.nodesDir(), n.Name)
		logs, _ := filepath.Glob(filepath.Join(dir, "node", "logs", "*.log"))
		logs = append(logs, filepath.Join(dir, "boot.log"), filepath.Join(dir, "node", "status.json"))
		for _, src := range logs {
			if err := copyFile(src, filepath.Join(dst, filepath.Base(src))); err == nil && len(kept) == 0 {
				kept = append(kept, c.cfg.nodesDir())
			}
		}
	}
	if _, err := Cleanup(ctx, c.cfg.Dir); err != nil {
		return "", err
	}
	if len(kept) == 0 {
		return "", nil
	}
	return "node logs kept in " + kept[0], nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
