package kubenode

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// criNamespace is the containerd namespace of the CRI plugin: kubelet's images and
// containers.
const criNamespace = "k8s.io"

// ctr runs containerd's ctr against the node's containerd. The runtime drives containerd
// through ctr, built by `make tools` from the same containerd version, rather than
// containerd's Go client: the client would bring containerd's module graph (gRPC, ttrpc,
// its API types) into nephele's core module for four calls.
type ctr struct {
	path    string
	address string
	// platform is the platform of the images to import: this node's, linux and
	// runtime.GOARCH.
	platform string
}

// nodePlatform is the platform of this node's images: the machine's.
func nodePlatform() string { return "linux/" + runtime.GOARCH }

// run runs ctr with args and returns its standard output.
func (c ctr) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.path, append([]string{"--address", c.address}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ready reports whether containerd answers.
func (c ctr) ready(ctx context.Context) error {
	_, err := c.run(ctx, "version")
	return err
}

// importImage imports an OCI archive into the CRI namespace, unpacked for kubelet: the
// image of the node's platform, which the archive must hold (nephele node images builds
// it for the machine it runs on).
func (c ctr) importImage(ctx context.Context, archive string) error {
	if _, err := c.run(ctx, "--namespace", criNamespace, "images", "import", "--platform", c.platform, archive); err != nil {
		return fmt.Errorf("importing the %s image (this node's GOARCH is %s): %w", c.platform, runtime.GOARCH, err)
	}
	return nil
}

// images lists the image references of the CRI namespace.
func (c ctr) images(ctx context.Context) ([]string, error) {
	out, err := c.run(ctx, "--namespace", criNamespace, "images", "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// removeAll kills every task and deletes every container of every namespace: what
// kubelet left running when it stopped. Pods' network namespaces stay mounted under
// containerd's state directory until unmountAll.
func (c ctr) removeAll(ctx context.Context) (int, error) {
	out, err := c.run(ctx, "namespaces", "list", "--quiet")
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, ns := range strings.Fields(out) {
		tasks, err := c.run(ctx, "--namespace", ns, "tasks", "list", "--quiet")
		if err != nil {
			return removed, err
		}
		for _, id := range strings.Fields(tasks) {
			// A task may end between the listing and the kill: errors show in the delete.
			_, _ = c.run(ctx, "--namespace", ns, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
		}
		for _, id := range strings.Fields(tasks) {
			if err := c.deleteTask(ctx, ns, id); err != nil {
				return removed, err
			}
		}
		containers, err := c.run(ctx, "--namespace", ns, "containers", "list", "--quiet")
		if err != nil {
			return removed, err
		}
		ids := strings.Fields(containers)
		if len(ids) > 0 {
			if _, err := c.run(ctx, slices.Concat([]string{"--namespace", ns, "containers", "delete"}, ids)...); err != nil {
				return removed, err
			}
		}
		removed += len(ids)
	}
	return removed, nil
}

// deleteTask deletes a killed task, retrying while it has not stopped yet.
func (c ctr) deleteTask(ctx context.Context, ns, id string) error {
	var err error
	for range 50 {
		if _, err = c.run(ctx, "--namespace", ns, "tasks", "delete", "--force", id); err == nil || strings.Contains(err.Error(), "not found") {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}
