package kubenode

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The apiVersion and kind of a node configuration file.
const (
	APIVersion = "node.nephele.dev/v1alpha1"
	Kind       = "NodeConfig"
)

// Environment variables a local cloud host gives its boot command. Config fields left
// empty take their value from these.
const (
	EnvInstanceName    = "NEPHELE_INSTANCE_NAME"
	EnvInstanceAddress = "NEPHELE_INSTANCE_ADDRESS"
	EnvHostDir         = "NEPHELE_HOST_DIR"
	EnvHostCgroup      = "NEPHELE_HOST_CGROUP"
)

// Config is a node configuration file: what `nephele node boot --config FILE` reads. It
// is YAML (or JSON) with apiVersion node.nephele.dev/v1alpha1 and kind NodeConfig.
// Complete checks it and resolves every default; only the result can boot a node.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// NodeName is the Node's name (kubelet --hostname-override); default
	// $NEPHELE_INSTANCE_NAME.
	NodeName string `json:"nodeName,omitempty"`
	// NodeIP is the node's address (kubelet --node-ip); default $NEPHELE_INSTANCE_ADDRESS.
	NodeIP string `json:"nodeIP,omitempty"`
	// HostDir is the host's own state directory; the node keeps everything in its node/
	// subdirectory. Default $NEPHELE_HOST_DIR.
	HostDir string `json:"hostDir,omitempty"`
	// CgroupRoot is the cgroup every process of the node lives under, as an absolute
	// cgroup path (kubelet's cgroupRoot); default "/" + $NEPHELE_HOST_CGROUP.
	CgroupRoot string `json:"cgroupRoot,omitempty"`

	// BinDir holds kubelet, kube-proxy, containerd, containerd-shim-runc-v2 and ctr.
	BinDir string `json:"binDir"`
	// CNIBinDir holds the CNI plugins bridge, host-local, loopback and portmap; default
	// BinDir/cni.
	CNIBinDir string `json:"cniBinDir,omitempty"`
	// Runc is the runc binary; default the runc found on PATH.
	Runc string `json:"runc,omitempty"`

	// APIServer is how the node reaches kube-apiserver.
	APIServer APIServer `json:"apiServer"`
	// Kubelet is the kubelet's identity (system:node:<name> in group system:nodes for the
	// Node authorizer).
	Kubelet Credentials `json:"kubelet"`
	// KubeProxy is kube-proxy's identity (system:kube-proxy, bound to the
	// system:node-proxier ClusterRole by default RBAC).
	KubeProxy Credentials `json:"kubeProxy"`

	// ClusterCIDR is the pod range of the whole cluster (kube-controller-manager's
	// --cluster-cidr); kube-proxy tells pod traffic from other traffic with it.
	ClusterCIDR string `json:"clusterCIDR"`
	// ClusterDNS are the DNS servers pods resolve with (kubelet clusterDNS). Empty means
	// none: pods get a resolv.conf that points at nothing outside the machine.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ClusterDomain is the cluster's DNS domain; default cluster.local.
	ClusterDomain string `json:"clusterDomain,omitempty"`

	// Images are OCI image archives imported into the node's containerd before kubelet
	// starts, for images no registry the node reaches serves.
	Images []string `json:"images,omitempty"`
	// Registries say where containerd pulls the images of a registry host from: each
	// becomes a hosts.toml in containerd's registry configuration directory.
	Registries []Registry `json:"registries,omitempty"`
	// SandboxImage is the pod sandbox (pause) image reference; it must be in Images,
	// or be served by one of Registries (containerd pulls it at the first pod).
	SandboxImage string `json:"sandboxImage"`
	// StaticPodDir is kubelet's staticPodPath; default HostDir/node/manifests.
	StaticPodDir string `json:"staticPodDir,omitempty"`
	// NodeLabels are labels kubelet registers the Node with (--node-labels).
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// Verbosity is the log level (-v) of kubelet, kube-proxy; 0 by default.
	Verbosity int `json:"verbosity,omitempty"`
}

// APIServer is the apiserver a node talks to.
type APIServer struct {
	// URL is the https URL, reachable from inside the host.
	URL string `json:"url"`
	// CAFile is the CA bundle that verifies the apiserver's serving certificate; kubelet
	// also trusts it for client certificates (the apiserver's, for logs and exec).
	CAFile string `json:"caFile"`
	// TLSServerName, when set, is the name the serving certificate is verified for,
	// instead of the URL's host: for an apiserver reached through an address its
	// certificate does not name.
	TLSServerName string `json:"tlsServerName,omitempty"`
}

// Credentials are a component's identity toward the apiserver: a kubeconfig file, or a
// client certificate and key, or a bearer token file. Exactly one form is given.
type Credentials struct {
	// Kubeconfig is a kubeconfig file used as it is.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// ClientCertFile and ClientKeyFile are a client certificate and its key.
	ClientCertFile string `json:"clientCertFile,omitempty"`
	ClientKeyFile  string `json:"clientKeyFile,omitempty"`
	// TokenFile holds a bearer token.
	TokenFile string `json:"tokenFile,omitempty"`
}

// Registry is where containerd pulls a registry host's images from.
type Registry struct {
	// Host is the registry host named by image references, such as nephele.local or
	// registry.example.com:5000.
	Host string `json:"host"`
	// Endpoint is the URL containerd pulls from instead, http:// or https://, such as
	// http://10.200.0.1:5000: a registry on the machine that serves Host's images.
	Endpoint string `json:"endpoint"`
	// CAFile, for an https Endpoint, is the CA bundle that verifies its certificate;
	// empty trusts the machine's CAs.
	CAFile string `json:"caFile,omitempty"`
}

// LoadConfig reads a node configuration file. It does not check it: Complete does.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read node config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("node config %s: %w", path, err)
	}
	return &c, nil
}

// Node is a completed node configuration: checked, with every default and path resolved.
// Only Complete makes one.
type Node struct {
	// Config is the configuration with defaults filled in.
	Config Config
	// IP is Config.NodeIP parsed.
	IP net.IP
	// Paths are the node's files and directories.
	Paths Paths
	// Binaries are the absolute paths of the programs the node runs.
	Binaries Binaries
}

// Binaries are the programs a node runs.
type Binaries struct {
	Containerd, Shim, Ctr, Kubelet, KubeProxy, Runc string
	// CNI is the directory of the CNI plugins.
	CNI string
}

// cniPlugins are the plugins the node's network configuration uses.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// Complete checks c, fills its defaults from getenv (os.Getenv in production: the host's
// environment variables) and finds runc with lookPath (LookPath in production), and
// returns the node it describes. Every problem is
// reported, one per line, naming the field.
func (c Config) Complete(getenv func(string) string, lookPath func(string) (string, error)) (*Node, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != APIVersion || c.Kind != Kind {
		bad("apiVersion/kind", "got %q/%q, want %s/%s", c.APIVersion, c.Kind, APIVersion, Kind)
	}
	fromEnv := func(v *string, field, env string) {
		if *v == "" {
			*v = getenv(env)
		}
		if *v == "" {
			bad(field, "required (or set %s)", env)
		}
	}
	fromEnv(&c.NodeName, "nodeName", EnvInstanceName)
	fromEnv(&c.NodeIP, "nodeIP", EnvInstanceAddress)
	fromEnv(&c.HostDir, "hostDir", EnvHostDir)
	if c.CgroupRoot == "" && getenv(EnvHostCgroup) != "" {
		c.CgroupRoot = "/" + strings.TrimPrefix(getenv(EnvHostCgroup), "/")
	}
	if c.CgroupRoot == "" {
		bad("cgroupRoot", "required (or set %s)", EnvHostCgroup)
	}

	if c.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
			bad("nodeName", "%s", msg)
		}
	}
	ip := net.ParseIP(c.NodeIP)
	if c.NodeIP != "" && (ip == nil || ip.To4() == nil) {
		bad("nodeIP", "%q is not an IPv4 address", c.NodeIP)
	}
	if c.CgroupRoot != "" {
		clean := filepath.Clean(c.CgroupRoot)
		if !filepath.IsAbs(c.CgroupRoot) || clean == "/" || clean != c.CgroupRoot {
			bad("cgroupRoot", "%q must be a clean absolute cgroup path below the root", c.CgroupRoot)
		}
	}
	absPath := func(v *string, field string, required bool) {
		if *v == "" {
			if required {
				bad(field, "required")
			}
			return
		}
		if !filepath.IsAbs(*v) {
			bad(field, "%q must be an absolute path", *v)
			return
		}
		*v = filepath.Clean(*v)
	}
	absPath(&c.HostDir, "hostDir", false)
	absPath(&c.BinDir, "binDir", true)
	if c.CNIBinDir == "" && c.BinDir != "" {
		c.CNIBinDir = filepath.Join(c.BinDir, "cni")
	}
	absPath(&c.CNIBinDir, "cniBinDir", false)
	if c.StaticPodDir == "" && c.HostDir != "" {
		c.StaticPodDir = filepath.Join(c.HostDir, nodeSubdir, "manifests")
	}
	absPath(&c.StaticPodDir, "staticPodDir", false)

	if u, err := url.Parse(c.APIServer.URL); err != nil || u.Scheme != "https" || u.Host == "" {
		bad("apiServer.url", "%q must be an https URL", c.APIServer.URL)
	}
	absPath(&c.APIServer.CAFile, "apiServer.caFile", true)
	c.Kubelet.check("kubelet", bad, absPath)
	c.KubeProxy.check("kubeProxy", bad, absPath)

	if _, _, err := net.ParseCIDR(c.ClusterCIDR); err != nil {
		bad("clusterCIDR", "%q is not a CIDR", c.ClusterCIDR)
	}
	for _, s := range c.ClusterDNS {
		if net.ParseIP(s) == nil {
			bad("clusterDNS", "%q is not an IP address", s)
		}
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.ClusterDomain) {
		bad("clusterDomain", "%s", msg)
	}
	for i := range c.Images {
		absPath(&c.Images[i], fmt.Sprintf("images[%d]", i), true)
	}
	hostsSeen := map[string]bool{}
	for i := range c.Registries {
		r := &c.Registries[i]
		field := fmt.Sprintf("registries[%d]", i)
		if !validRegistryHost(r.Host) {
			bad(field+".host", "%q is not a registry host (a DNS name or IP address, optionally with :port)", r.Host)
		} else if hostsSeen[r.Host] {
			bad(field+".host", "%q is given twice", r.Host)
		}
		hostsSeen[r.Host] = true
		u, err := url.Parse(r.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad(field+".endpoint", "%q must be an http:// or https:// URL with no path, such as http://10.200.0.1:5000", r.Endpoint)
		} else if r.CAFile != "" && u.Scheme != "https" {
			bad(field+".caFile", "is only for an https endpoint, not %s", r.Endpoint)
		}
		absPath(&r.CAFile, field+".caFile", false)
	}
	if c.SandboxImage == "" {
		bad("sandboxImage", "required: the pause image reference, imported from images or pulled from registries")
	}
	for k, v := range c.NodeLabels {
		for _, msg := range validation.IsQualifiedName(k) {
			bad("nodeLabels", "key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			bad("nodeLabels", "value of %q: %s", k, msg)
		}
	}
	if c.Verbosity < 0 || c.Verbosity > 10 {
		bad("verbosity", "%d is not between 0 and 10", c.Verbosity)
	}
	if len(errs) > 0 {
		return nil, configError(errs)
	}

	n := &Node{Config: c, IP: ip.To4(), Paths: newPaths(c.HostDir)}
	n.Binaries = Binaries{
		Containerd: filepath.Join(c.BinDir, "containerd"),
		Shim:       filepath.Join(c.BinDir, "containerd-shim-runc-v2"),
		Ctr:        filepath.Join(c.BinDir, "ctr"),
		Kubelet:    filepath.Join(c.BinDir, "kubelet"),
		KubeProxy:  filepath.Join(c.BinDir, "kube-proxy"),
		Runc:       c.Runc,
		CNI:        c.CNIBinDir,
	}
	if n.Binaries.Runc == "" {
		p, err := lookPath("runc")
		if err != nil {
			errs = append(errs, fmt.Errorf("runc: not found on PATH (install it: hack/install-node-deps.sh): %w", err))
		}
		n.Binaries.Runc = p
	}
	if len(errs) > 0 {
		return nil, configError(errs)
	}
	return n, nil
}

// check reports which credential forms are given, wrongly.
func (cr *Credentials) check(field string, bad func(string, string, ...any), absPath func(*string, string, bool)) {
	forms := 0
	if cr.Kubeconfig != "" {
		forms++
		absPath(&cr.Kubeconfig, field+".kubeconfig", true)
	}
	if cr.ClientCertFile != "" || cr.ClientKeyFile != "" {
		forms++
		absPath(&cr.ClientCertFile, field+".clientCertFile", true)
		absPath(&cr.ClientKeyFile, field+".clientKeyFile", true)
	}
	if cr.TokenFile != "" {
		forms++
		absPath(&cr.TokenFile, field+".tokenFile", true)
	}
	if forms != 1 {
		bad(field, "give exactly one of kubeconfig, clientCertFile and clientKeyFile, or tokenFile (got %d)", forms)
	}
}

// configError joins the problems of a configuration, sorted, one per line.
func configError(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	slices.Sort(msgs)
	return errors.New("invalid node config:\n  " + strings.Join(msgs, "\n  "))
}

// LookPath finds a program on PATH and, failing that, in the sbin directories, which
// root's PATH usually has and a service's may not. It is the lookPath of Complete in
// production.
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin"} {
		if info, serr := os.Stat(filepath.Join(dir, name)); serr == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return filepath.Join(dir, name), nil
		}
	}
	return "", err
}

// CheckBinaries reports every program of the node that is missing or not executable.
func (n *Node) CheckBinaries() error {
	var missing []string
	check := func(p string) {
		if info, err := os.Stat(p); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	b := n.Binaries
	for _, p := range []string{b.Containerd, b.Shim, b.Ctr, b.Kubelet, b.KubeProxy, b.Runc} {
		check(p)
	}
	for _, p := range cniPlugins {
		check(filepath.Join(b.CNI, p))
	}
	if len(missing) > 0 {
		return fmt.Errorf("node binaries missing (run make tools, and hack/install-node-deps.sh for runc): %s", strings.Join(missing, ", "))
	}
	return nil
}

// validRegistryHost reports whether host is a DNS name or an IP address, optionally with
// a port: the first element of an image reference.
func validRegistryHost(host string) bool {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	return h != "" && len(validation.IsDNS1123Subdomain(h)) == 0
}

// registryFor returns the registry of ref's host, nil when none is configured.
func (c *Config) registryFor(ref string) *Registry {
	host, _, _ := strings.Cut(ref, "/")
	for i := range c.Registries {
		if c.Registries[i].Host == host {
			return &c.Registries[i]
		}
	}
	return nil
}
