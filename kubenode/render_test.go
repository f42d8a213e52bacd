package kubenode

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// testConfig is a complete node configuration with fixed paths.
func testConfig() Config {
	return Config{
		APIVersion:   APIVersion,
		Kind:         Kind,
		BinDir:       "/opt/nephele/bin",
		Runc:         "/usr/sbin/runc",
		APIServer:    APIServer{URL: "https://10.88.0.1:6443", CAFile: "/etc/nephele/ca.crt", TLSServerName: "localhost"},
		Kubelet:      Credentials{ClientCertFile: "/etc/nephele/node-a.crt", ClientKeyFile: "/etc/nephele/node-a.key"},
		KubeProxy:    Credentials{TokenFile: "/etc/nephele/kube-proxy.token"},
		ClusterCIDR:  "10.244.0.0/16",
		Images:       []string{"/var/lib/nephele/images/pause.tar", "/var/lib/nephele/images/demo-http.tar"},
		SandboxImage: "nephele.local/pause:dev",
		Registries: []Registry{
			{Host: "nephele.local", Endpoint: "http://10.88.0.1:5000"},
			{Host: "registry.example:5443", Endpoint: "https://10.88.0.1:5443", CAFile: "/etc/nephele/registry-ca.crt"},
		},
		NodeLabels: map[string]string{"nephele.dev/pool": "default", "a.example/b": "c"},
	}
}

// hostEnv is what a local cloud host sets for its boot command.
func hostEnv(k string) string {
	return map[string]string{
		EnvInstanceName:    "node-a",
		EnvInstanceAddress: "10.88.0.2",
		EnvHostDir:         "/var/lib/nephele/hosts/node-a",
		EnvHostCgroup:      "nephele/hosts/node-a",
	}[k]
}

func noRunc(string) (string, error) { return "", os.ErrNotExist }

func testNode(t *testing.T) *Node {
	t.Helper()
	n, err := testConfig().Complete(hostEnv, noRunc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestRenderGolden(t *testing.T) {
	n := testNode(t)
	files, err := Render(n)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{
		n.Paths.ContainerdConfig:  "containerd.toml",
		n.Paths.KubeletConfig:     "kubelet.yaml",
		n.Paths.ProxyConfig:       "kube-proxy.yaml",
		n.Paths.ResolvConf:        "resolv.conf",
		n.Paths.KubeletKubeconfig: "kubelet.kubeconfig",
		n.Paths.ProxyKubeconfig:   "kube-proxy.kubeconfig",
		filepath.Join(n.Paths.RegistryHosts, "nephele.local", "hosts.toml"):         "hosts-nephele.local.toml",
		filepath.Join(n.Paths.RegistryHosts, "registry.example:5443", "hosts.toml"): "hosts-registry.example.toml",
	}
	if len(files) != len(names) {
		t.Errorf("rendered %d files, want %d", len(files), len(names))
	}
	for _, f := range files {
		name, ok := names[f.Path]
		if !ok {
			t.Errorf("unexpected file %s", f.Path)
			continue
		}
		golden(t, name, f.Data)
	}
	cni, err := RenderCNI(n, "10.244.3.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if cni.Path != "/var/lib/nephele/hosts/node-a/node/cni/net.d/10-nephele.conflist" {
		t.Errorf("CNI config path = %s", cni.Path)
	}
	golden(t, "10-nephele.conflist", cni.Data)
	golden(t, "kubelet.args", []byte(strings.Join(kubeletArgs(n), "\n")+"\n"))
	golden(t, "kube-proxy.args", []byte(strings.Join(proxyArgs(n), "\n")+"\n"))
}

func TestRenderGivenKubeconfig(t *testing.T) {
	c := testConfig()
	c.Kubelet = Credentials{Kubeconfig: "/etc/nephele/kubelet.kubeconfig"}
	n, err := c.Complete(hostEnv, noRunc)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == n.Paths.KubeletKubeconfig {
			t.Error("a kubeconfig was rendered for kubelet, which was given one")
		}
	}
	if got := kubeletArgs(n)[1]; got != "--kubeconfig=/etc/nephele/kubelet.kubeconfig" {
		t.Errorf("kubelet's kubeconfig flag = %s", got)
	}
}

func TestResolvConfWithClusterDNS(t *testing.T) {
	c := testConfig()
	c.ClusterDNS = []string{"10.96.0.10"}
	n, err := c.Complete(hostEnv, noRunc)
	if err != nil {
		t.Fatal(err)
	}
	got := string(renderResolvConf(n))
	if !strings.Contains(got, "nameserver 10.96.0.10\n") || strings.Contains(got, "127.0.0.1") {
		t.Errorf("resolv.conf = %q", got)
	}
}

func TestRenderCNIRejects(t *testing.T) {
	n := testNode(t)
	for _, cidr := range []string{"", "10.244.0.0", "fd00::/64", "10.244.0.0/31"} {
		if _, err := RenderCNI(n, cidr); err == nil {
			t.Errorf("RenderCNI(%q) accepted", cidr)
		}
	}
}
