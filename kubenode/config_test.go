package kubenode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompleteDefaults(t *testing.T) {
	n := testNode(t)
	c := n.Config
	if c.NodeName != "node-a" || c.NodeIP != "10.88.0.2" || c.HostDir != "/var/lib/nephele/hosts/node-a" {
		t.Errorf("host environment not used: %+v", c)
	}
	if c.CgroupRoot != "/nephele/hosts/node-a" {
		t.Errorf("cgroupRoot = %q, want /nephele/hosts/node-a", c.CgroupRoot)
	}
	if c.CNIBinDir != "/opt/nephele/bin/cni" || c.StaticPodDir != "/var/lib/nephele/hosts/node-a/node/manifests" || c.ClusterDomain != "cluster.local" {
		t.Errorf("defaults: cniBinDir %q staticPodDir %q clusterDomain %q", c.CNIBinDir, c.StaticPodDir, c.ClusterDomain)
	}
	if n.Binaries.Runc != "/usr/sbin/runc" || n.Binaries.Kubelet != "/opt/nephele/bin/kubelet" {
		t.Errorf("binaries = %+v", n.Binaries)
	}
	// Fields given in the file win over the environment.
	cfg := testConfig()
	cfg.NodeName, cfg.HostDir, cfg.CgroupRoot = "other", "/srv/other", "/x/y"
	n, err := cfg.Complete(hostEnv, noRunc)
	if err != nil {
		t.Fatal(err)
	}
	if n.Config.NodeName != "other" || n.Paths.Dir != "/srv/other/node" || n.Config.CgroupRoot != "/x/y" {
		t.Errorf("explicit fields lost: %+v", n.Config)
	}
	// runc from PATH when not given.
	cfg = testConfig()
	cfg.Runc = ""
	n, err = cfg.Complete(hostEnv, func(string) (string, error) { return "/usr/bin/runc", nil })
	if err != nil || n.Binaries.Runc != "/usr/bin/runc" {
		t.Errorf("runc from PATH: %v, %+v", err, n)
	}
}

func TestCompleteRejects(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		name   string
		modify func(*Config)
		getenv func(string) string
		want   string
	}{
		{"kind", func(c *Config) { c.Kind = "Other" }, hostEnv, "apiVersion/kind"},
		{"no host", func(*Config) {}, noEnv, "nodeName: required (or set NEPHELE_INSTANCE_NAME)"},
		{"no cgroup", func(*Config) {}, func(k string) string {
			if k == EnvHostCgroup {
				return ""
			}
			return hostEnv(k)
		}, "cgroupRoot: required"},
		{"node name", func(c *Config) { c.NodeName = "Node_A" }, hostEnv, "nodeName:"},
		{"node IP", func(c *Config) { c.NodeIP = "fd00::1" }, hostEnv, "nodeIP:"},
		{"cgroup root", func(c *Config) { c.CgroupRoot = "relative" }, hostEnv, "cgroupRoot:"},
		{"cgroup root /", func(c *Config) { c.CgroupRoot = "/" }, hostEnv, "cgroupRoot:"},
		{"bin dir", func(c *Config) { c.BinDir = "" }, hostEnv, "binDir: required"},
		{"relative", func(c *Config) { c.BinDir = "bin" }, hostEnv, "binDir:"},
		{"apiserver", func(c *Config) { c.APIServer.URL = "http://10.0.0.1" }, hostEnv, "apiServer.url:"},
		{"ca", func(c *Config) { c.APIServer.CAFile = "" }, hostEnv, "apiServer.caFile: required"},
		{"no credentials", func(c *Config) { c.Kubelet = Credentials{} }, hostEnv, "kubelet: give exactly one"},
		{"two credentials", func(c *Config) { c.KubeProxy.Kubeconfig = "/k" }, hostEnv, "kubeProxy: give exactly one"},
		{"key without cert", func(c *Config) { c.Kubelet = Credentials{ClientKeyFile: "/k"} }, hostEnv, "kubelet.clientCertFile: required"},
		{"cluster CIDR", func(c *Config) { c.ClusterCIDR = "10.244.0.0" }, hostEnv, "clusterCIDR:"},
		{"cluster DNS", func(c *Config) { c.ClusterDNS = []string{"dns"} }, hostEnv, "clusterDNS:"},
		{"image", func(c *Config) { c.Images = []string{"pause.tar"} }, hostEnv, "images[0]:"},
		{"sandbox", func(c *Config) { c.SandboxImage = "" }, hostEnv, "sandboxImage: required"},
		{"registry host", func(c *Config) { c.Registries = []Registry{{Host: "Bad_Host", Endpoint: "http://10.0.0.1:5000"}} }, hostEnv, "registries[0].host:"},
		{"registry port", func(c *Config) {
			c.Registries = []Registry{{Host: "r.example:99999", Endpoint: "http://10.0.0.1:5000"}}
		}, hostEnv, "registries[0].host:"},
		{"registry twice", func(c *Config) {
			c.Registries = []Registry{{Host: "nephele.local", Endpoint: "http://10.0.0.1:5000"}, {Host: "nephele.local", Endpoint: "http://10.0.0.2:5000"}}
		}, hostEnv, "registries[1].host: \"nephele.local\" is given twice"},
		{"registry endpoint", func(c *Config) { c.Registries = []Registry{{Host: "nephele.local", Endpoint: "10.0.0.1:5000"}} }, hostEnv, "registries[0].endpoint:"},
		{"registry endpoint path", func(c *Config) {
			c.Registries = []Registry{{Host: "nephele.local", Endpoint: "http://10.0.0.1:5000/v2"}}
		}, hostEnv, "registries[0].endpoint:"},
		{"registry CA on http", func(c *Config) {
			c.Registries = []Registry{{Host: "nephele.local", Endpoint: "http://10.0.0.1:5000", CAFile: "/ca.crt"}}
		}, hostEnv, "registries[0].caFile: is only for an https endpoint"},
		{"registry CA relative", func(c *Config) {
			c.Registries = []Registry{{Host: "nephele.local", Endpoint: "https://10.0.0.1:5000", CAFile: "ca.crt"}}
		}, hostEnv, "registries[0].caFile:"},
		{"label", func(c *Config) { c.NodeLabels = map[string]string{"a b": "c"} }, hostEnv, "nodeLabels:"},
		{"verbosity", func(c *Config) { c.Verbosity = 11 }, hostEnv, "verbosity:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig()
			tt.modify(&c)
			_, err := c.Complete(tt.getenv, noRunc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	c := testConfig()
	c.Runc = ""
	if _, err := c.Complete(hostEnv, noRunc); err == nil || !strings.Contains(err.Error(), "runc: not found on PATH") {
		t.Errorf("missing runc: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	data := `apiVersion: node.nephele.dev/v1alpha1
kind: NodeConfig
binDir: /opt/nephele/bin
runc: /usr/sbin/runc
apiServer:
  url: https://10.88.0.1:6443
  caFile: /etc/nephele/ca.crt
kubelet:
  clientCertFile: /etc/nephele/node.crt
  clientKeyFile: /etc/nephele/node.key
kubeProxy:
  kubeconfig: /etc/nephele/kube-proxy.kubeconfig
clusterCIDR: 10.244.0.0/16
images: [/images/pause.tar]
sandboxImage: nephele.local/pause:dev
`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(hostEnv, noRunc); err != nil {
		t.Errorf("complete: %v", err)
	}
	if err := os.WriteFile(path, []byte(data+"unknownField: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "unknownField") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestKeepPaths(t *testing.T) {
	n := testNode(t)
	keep, err := n.keepPaths()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/nephele", "/opt/nephele/bin", "/usr/sbin", "/var/lib/nephele/hosts/node-a", "/var/lib/nephele/images"}
	if strings.Join(keep, " ") != strings.Join(want, " ") {
		t.Errorf("keep = %q, want %q", keep, want)
	}
	c := testConfig()
	c.BinDir = "/var/lib"
	n, err = c.Complete(hostEnv, noRunc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.keepPaths(); err == nil {
		t.Error("a binary directory that is a private tree was accepted")
	}
}
