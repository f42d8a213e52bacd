package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/providers/local"
)

// hostStopTimeout is the local cloud's --host-stop-timeout: how long a node runtime has
// to take its node down (kube-proxy, kubelet, the containers, containerd, mounts,
// cgroups, chains) after SIGTERM before everything in the host is killed.
const hostStopTimeout = 90 * time.Second

// LocalCloud is one local cloud of a cluster: its API, the tokens of its administrator
// and of every CCM, and, for real nodes, its bridge's address.
type LocalCloud struct {
	// Name is the cloud's name: FirstCloud, or SecondCloud in a hybrid cluster. It is
	// also the scheme of its nodes' provider IDs.
	Name string
	// Client talks to the cloud's API at URL with the administrator's token in
	// TokenFile. CCMTokenFile holds the token every CCM of the cluster gets, whose role
	// is a CCM's (server.IsCCMOperation): it cannot make hosts or set faults.
	Client       *client.Client
	URL          string
	TokenFile    string
	CCMTokenFile string
	// CSITokenFile holds the token of the CSI driver's role (manage volumes, read
	// instances), which the driver's controller gets in a Secret.
	CSITokenFile string
	// CAFile is the certificate the cloud's HTTPS API is verified with.
	CAFile string
	// Gateway is the bridge's address: where the cloud's hosts and their pods reach the
	// machine (real nodes; with kwok nodes everything is on loopback and Gateway is the
	// zero Addr).
	Gateway netip.Addr
	// VIPPool is where its load balancers' VIPs come from.
	VIPPool netip.Prefix

	dir, hostDir string
	proc         *controlplane.Process
}

// Class is the load balancer class of the cloud's Services in a hybrid cluster:
// FirstCloudClass or SecondCloudClass.
func (lc *LocalCloud) Class() string {
	if lc.Name == SecondCloud {
		return SecondCloudClass
	}
	return FirstCloudClass
}

// cloudSpec is what launchCloud starts a local cloud with.
type cloudSpec struct {
	name, dir, hostDir, bridge string
	instanceCIDR, vipPool      netip.Prefix
	real                       bool
	// guards are the CIDRs that must never leave the machine (real nodes).
	guards []netip.Prefix
	// peers are the other cloud's network, in a hybrid cluster; guardMetric is this
	// cloud's guard metric, the second's other than the first's.
	peers       []hosts.Peer
	guardMetric int
	// attachLimit is the cloud's --volume-attach-limit; 0 leaves its default.
	attachLimit int
}

// writeToken writes a new random bearer token (24 bytes, hex) to path, readable by its
// owner only, and returns it; what names it in errors.
func writeToken(path, what string) (string, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make %s: %w", what, err)
	}
	token := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", what, err)
	}
	return token, nil
}

// launchCloud starts a local cloud on a fresh state: with host instances on a bridge for
// real nodes, on loopback for kwok nodes.
func launchCloud(ctx context.Context, binDir string, spec cloudSpec) (*LocalCloud, error) {
	lc := &LocalCloud{Name: spec.name, dir: spec.dir, hostDir: spec.hostDir, VIPPool: spec.vipPool}
	if err := os.MkdirAll(spec.dir, 0o755); err != nil {
		return nil, err
	}
	lc.TokenFile = filepath.Join(spec.dir, "token")
	token, err := writeToken(lc.TokenFile, "the local cloud's token")
	if err != nil {
		return nil, err
	}
	// The CCM gets a token of its own, which may only read instances and manage load
	// balancers and routes: in the cluster it is in a Secret that pods mount, and the
	// administrator's token makes hosts whose boot command runs as root here. The CSI
	// driver gets one of its own role too, kept apart from the CCM's: each Secret can do
	// only its component's work.
	lc.CCMTokenFile = filepath.Join(spec.dir, "ccm-token")
	if _, err := writeToken(lc.CCMTokenFile, "the CCM's cloud token"); err != nil {
		return nil, err
	}
	lc.CSITokenFile = filepath.Join(spec.dir, "csi-token")
	if _, err := writeToken(lc.CSITokenFile, "the CSI driver's cloud token"); err != nil {
		return nil, err
	}
	addrFile := filepath.Join(spec.dir, "address")
	// The API is HTTPS on a certificate the cloud makes at start: the CCM's token crosses
	// the bridge, and every client verifies the cloud with this CA certificate.
	lc.CAFile = filepath.Join(spec.dir, "ca.crt")
	args := []string{
		"--serving-ca-file", lc.CAFile,
		"--state", filepath.Join(spec.dir, "state.db"),
		"--token-file", lc.TokenFile,
		"--ccm-token-file", lc.CCMTokenFile,
		"--csi-token-file", lc.CSITokenFile,
		"--address-file", addrFile,
		"--vip-pool", spec.vipPool.String(),
		"--instance-cidr", spec.instanceCIDR.String(),
	}
	if spec.attachLimit > 0 {
		args = append(args, "--volume-attach-limit", strconv.Itoa(spec.attachLimit))
	}
	if spec.real {
		// The cloud listens on the bridge's address (the cloud creates the bridge before
		// it listens): the CCM reaches it there from the machine and from pods on the
		// nodes.
		lc.Gateway = hosts.Gateway(spec.instanceCIDR)
		args = append(args,
			"--listen", net.JoinHostPort(lc.Gateway.String(), "0"),
			"--hosts",
			"--bridge", spec.bridge,
			"--host-dir", spec.hostDir,
			"--host-stop-timeout", hostStopTimeout.String(),
		)
		// Pod and Service addresses never follow the machine's default route out: a
		// pod CIDR without a route in the cloud is unreachable, here.
		for _, g := range spec.guards {
			args = append(args, "--guard-cidr", g.String())
		}
		for _, p := range spec.peers {
			args = append(args, "--peer", p.Bridge+"="+p.Range.String())
		}
		if spec.guardMetric != 0 {
			args = append(args, "--guard-metric", strconv.Itoa(spec.guardMetric))
		}
	} else {
		// Kwok nodes' instances are plain records on loopback addresses, and so is
		// everything that talks to the cloud.
		args = append(args, "--listen", "127.0.0.1:0")
	}
	cmd := exec.Command(filepath.Join(binDir, "localcloud"), args...)
	p, err := controlplane.StartLogged("localcloud", cmd, filepath.Join(spec.dir, "localcloud.log"))
	if err != nil {
		return nil, err
	}
	lc.proc = p
	if lc.URL, lc.Client, err = WaitForCloud(ctx, p, addrFile, lc.CAFile, token, "nephele-localcluster"); err != nil {
		return lc, err
	}
	return lc, nil
}

// startCloud starts the cluster's (first) local cloud.
func (c *Cluster) startCloud(ctx context.Context) (string, error) {
	real := c.cfg.NodeMode == NodesReal
	spec := cloudSpec{name: FirstCloud, dir: c.cfg.cloudDir(), hostDir: c.cfg.hostDir(), bridge: c.cfg.Bridge,
		instanceCIDR: c.cfg.InstanceCIDR, vipPool: c.cfg.VIPPool, real: real,
		guards: []netip.Prefix{c.cfg.ClusterCIDR, c.cfg.ServiceCIDR}, attachLimit: c.cfg.VolumeAttachLimit}
	if h := c.cfg.Hybrid; h != nil {
		spec.peers = []hosts.Peer{{Bridge: h.Bridge, Range: h.InstanceCIDR}}
	}
	lc, err := launchCloud(ctx, c.cfg.BinDir, spec)
	if lc != nil {
		c.first = lc
		c.cloudProc = lc.proc
		c.Cloud, c.CloudURL, c.CloudTokenFile, c.CCMTokenFile, c.CloudCAFile, c.Gateway = lc.Client, lc.URL, lc.TokenFile, lc.CCMTokenFile, lc.CAFile, lc.Gateway
	}
	if err != nil {
		return "", err
	}
	if !real {
		return c.CloudURL, nil
	}
	return fmt.Sprintf("%s, bridge %s %s", c.CloudURL, c.cfg.Bridge, c.Gateway), nil
}

// startSecondCloud starts a hybrid cluster's second local cloud, the first's peer.
func (c *Cluster) startSecondCloud(ctx context.Context) (string, error) {
	h := c.cfg.Hybrid
	lc, err := launchCloud(ctx, c.cfg.BinDir, cloudSpec{name: SecondCloud, dir: c.cfg.secondCloudDir(), hostDir: c.cfg.secondHostDir(),
		bridge: h.Bridge, instanceCIDR: h.InstanceCIDR, vipPool: h.VIPPool, real: true,
		guards: []netip.Prefix{c.cfg.ClusterCIDR, c.cfg.ServiceCIDR},
		peers:  []hosts.Peer{{Bridge: c.cfg.Bridge, Range: c.cfg.InstanceCIDR}},
		// Both clouds guard the pod and Service ranges: each removes its own routes.
		guardMetric: hosts.DefaultGuardMetric + 1})
	if lc != nil {
		c.Second = lc
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, bridge %s %s", lc.URL, h.Bridge, lc.Gateway), nil
}

// Clouds returns the cluster's local clouds: the first, and in a hybrid cluster the
// second.
func (c *Cluster) Clouds() []*LocalCloud {
	if c.Second == nil {
		return []*LocalCloud{c.first}
	}
	return []*LocalCloud{c.first, c.Second}
}

// cloudOf returns the local cloud node n is an instance of.
func (c *Cluster) cloudOf(n Node) *LocalCloud {
	if n.Cloud == SecondCloud && c.Second != nil {
		return c.Second
	}
	return c.first
}

// writeCloudConfig writes the local provider's --cloud-config and returns its path.
func (c *Cluster) writeCloudConfig() (string, error) { return writeCloudConfig(c.first) }

// writeCloudConfig writes the local provider's --cloud-config for lc in its directory
// and returns its path. The second cloud's provider writes provider IDs of its own
// scheme.
func writeCloudConfig(lc *LocalCloud) (string, error) {
	path := filepath.Join(lc.dir, "cloud-config.yaml")
	f := local.File{Endpoint: lc.URL, TokenFile: lc.CCMTokenFile, CAFile: lc.CAFile}
	if lc.Name != FirstCloud {
		f.ProviderIDScheme = lc.Name
	}
	cfg, err := f.Marshal("nephele's localcluster")
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
//
// A hybrid cluster's second cloud goes first: its network is the first's peer.
func Cleanup(ctx context.Context, dir string) (string, error) {
	var said []string
	for _, hostDir := range []string{filepath.Join(dir, "hosts-b"), filepath.Join(dir, "hosts")} {
		recorded, err := recordedHosts(hostDir)
		if err != nil {
			return "", err
		}
		if err := hosts.Cleanup(ctx, hostDir, logr.Discard()); err != nil {
			return "", fmt.Errorf("clean up after the cluster in %s: %w", dir, err)
		}
		if recorded != "" {
			said = append(said, recorded)
		}
	}
	return strings.Join(said, "; "), nil
}
