package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/providers/local"
)

// hostStopTimeout is the local cloud's --host-stop-timeout: how long a node runtime has
// to take its node down (kube-proxy, kubelet, the containers, containerd, mounts,
// cgroups, chains) after SIGTERM before everything in the host is killed.
const hostStopTimeout = 90 * time.Second

// startCloud starts the local cloud on a fresh state: with host instances on a bridge for
// real nodes, on loopback for kwok nodes.
func (c *Cluster) startCloud(ctx context.Context) (string, error) {
	dir := c.cfg.cloudDir()
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw)
	c.CloudTokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(c.CloudTokenFile, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the local cloud's token: %w", err)
	}
	// The CCM gets a token of its own, which may only read instances and manage load
	// balancers and routes: in the cluster it is in a Secret that pods mount, and the
	// administrator's token makes hosts whose boot command runs as root here.
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	c.CCMTokenFile = filepath.Join(dir, "ccm-token")
	if err := os.WriteFile(c.CCMTokenFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the CCM's cloud token: %w", err)
	}
	addrFile := filepath.Join(dir, "address")
	// The API is HTTPS on a certificate the cloud makes at start: the CCM's token crosses
	// the bridge, and every client verifies the cloud with this CA certificate.
	c.CloudCAFile = filepath.Join(dir, "ca.crt")
	args := []string{
		"--serving-ca-file", c.CloudCAFile,
		"--state", filepath.Join(dir, "state.db"),
		"--token-file", c.CloudTokenFile,
		"--ccm-token-file", c.CCMTokenFile,
		"--address-file", addrFile,
		"--vip-pool", c.cfg.VIPPool.String(),
		"--instance-cidr", c.cfg.InstanceCIDR.String(),
	}
	if c.cfg.NodeMode == NodesReal {
		// The cloud listens on the bridge's address (the cloud creates the bridge before
		// it listens): the CCM reaches it there from the machine and from pods on the
		// nodes.
		c.Gateway = hosts.Gateway(c.cfg.InstanceCIDR)
		args = append(args,
			"--listen", net.JoinHostPort(c.Gateway.String(), "0"),
			"--hosts",
			"--bridge", c.cfg.Bridge,
			"--host-dir", c.cfg.hostDir(),
			"--host-stop-timeout", hostStopTimeout.String(),
			// Pod and Service addresses never follow the machine's default route out: a
			// pod CIDR without a route in the cloud is unreachable, here.
			"--guard-cidr", c.cfg.ClusterCIDR.String(),
			"--guard-cidr", c.cfg.ServiceCIDR.String(),
		)
	} else {
		// Kwok nodes' instances are plain records on loopback addresses, and so is
		// everything that talks to the cloud.
		args = append(args, "--listen", "127.0.0.1:0")
	}
	cmd := exec.Command(filepath.Join(c.cfg.BinDir, "localcloud"), args...)
	p, err := controlplane.StartLogged("localcloud", cmd, filepath.Join(dir, "localcloud.log"))
	if err != nil {
		return "", err
	}
	c.cloudProc = p
	if c.CloudURL, c.Cloud, err = WaitForCloud(ctx, p, addrFile, c.CloudCAFile, token, "nephele-localcluster"); err != nil {
		return "", err
	}
	if c.cfg.NodeMode == NodesKwok {
		return c.CloudURL, nil
	}
	return fmt.Sprintf("%s, bridge %s %s", c.CloudURL, c.cfg.Bridge, c.Gateway), nil
}

// writeCloudConfig writes the local provider's --cloud-config and returns its path.
func (c *Cluster) writeCloudConfig() (string, error) {
	path := filepath.Join(c.cfg.cloudDir(), "cloud-config.yaml")
	cfg, err := local.File{Endpoint: c.CloudURL, TokenFile: c.CCMTokenFile, CAFile: c.CloudCAFile}.Marshal("nephele's localcluster")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return "", fmt.Errorf("write the cloud config: %w", err)
	}
	return path, nil
}

// recordedHosts says what the local cloud's journal in hostDir records on the machine,
// "" when nothing.
func recordedHosts(hostDir string) (string, error) {
	recorded, err := hosts.Recorded(hostDir)
	if err != nil {
		return "", fmt.Errorf("read what the previous run recorded in %s: %w", hostDir, err)
	}
	if !recorded {
		return "", nil
	}
	ids, _ := filepath.Glob(filepath.Join(hostDir, "i-*"))
	return fmt.Sprintf("%s, the bridge, routes and chains recorded in %s", plural(len(ids), "host"), hostDir), nil
}

// Cleanup removes from the machine everything a cluster in dir recorded and left, such
// as a run killed with SIGKILL leaves: its hosts with every process in them (kubelets,
// containerd, pods), their namespaces, mounts and cgroups, the bridge, the routes and
// the forward chain, and the hosts' directories. It says what it removed, "" when the
// directory recorded nothing on the machine. It fails when a running cluster's local
// cloud holds the directory.
func Cleanup(ctx context.Context, dir string) (string, error) {
	hostDir := filepath.Join(dir, "hosts")
	recorded, err := recordedHosts(hostDir)
	if err != nil {
		return "", err
	}
	if err := hosts.Cleanup(ctx, hostDir, logr.Discard()); err != nil {
		return "", fmt.Errorf("clean up after the cluster in %s: %w", dir, err)
	}
	return recorded, nil
}
