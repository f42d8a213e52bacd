package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testenv"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/localcloud/servertest"
)

// runMainEnv makes the test binary run main instead of the tests: the tests start the
// binary's real main path as a subprocess of themselves.
const runMainEnv = "NEPHELE_TEST_RUN_CLOUD_CONTROLLER_MANAGER"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const (
	pollTimeout        = 90 * time.Second
	taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	annotationNodeIP   = "alpha.kubernetes.io/provided-node-ip"
	lbFinalizer        = "service.kubernetes.io/load-balancer-cleanup"
	cloudToken         = "ccm-test-token"
)

// proc is a cloud-controller-manager process started from this test binary.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCCM runs main with args in a subprocess, killed when the test ends.
func startCCM(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting the cloud-controller-manager: %v", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("cloud-controller-manager output:\n%s", p.out.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(pollTimeout):
		t.Fatalf("the cloud-controller-manager did not exit within %s", pollTimeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommandLine checks the binary's start-up failures and help without a cluster.
func TestCommandLine(t *testing.T) {
	kubeconfig := writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	badConfig := writeFile(t, "cloud.yaml", "endpoint: http://127.0.0.1:1\ntoken: x\ntokenfile: y\n")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"help", []string{"--help"}, 0, []string{"Cloud providers in this binary: [local]", "--cloud-config", "--leader-elect", "--controllers"}},
		{"no cloud config", []string{"--cloud-provider=local", "--kubeconfig=" + kubeconfig, "--secure-port=0"}, 1, []string{"invalid value for --cloud-config", "no --cloud-config given"}},
		{"strict cloud config", []string{"--cloud-provider=local", "--cloud-config=" + badConfig, "--kubeconfig=" + kubeconfig, "--secure-port=0"}, 1, []string{`unknown field "tokenfile"`}},
		{"unknown provider", []string{"--cloud-provider=aws", "--kubeconfig=" + kubeconfig, "--secure-port=0"}, 1, []string{`invalid value for --cloud-provider`, `unknown cloud provider "aws"`, "known providers are local"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startCCM(t, tt.args...)
			if code := p.wait(t); code != tt.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tt.code, p.out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(p.out.String(), w) {
					t.Errorf("output does not contain %q:\n%s", w, p.out.String())
				}
			}
		})
	}
}

// randomPrefix returns a random /24 inside 127.second.0.0/16, so test binaries running
// at the same time rarely share addresses.
func randomPrefix(second byte) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, second, byte(rand.IntN(256)), 0}), 24)
}

// freePort returns a port in [lo, hi) free for TCP on every one of addrs a moment ago.
func freePort(t *testing.T, lo, hi int, addrs ...netip.Addr) uint16 {
	t.Helper()
	for range 500 {
		port := uint16(lo + rand.IntN(hi-lo))
		ok := true
		var lns []net.Listener
		for _, a := range addrs {
			ln, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no free port in [%d, %d) on %v", lo, hi, addrs)
	return 0
}

// echo answers each line on addr with "tag line" until the test ends.
func echo(t *testing.T, addr netip.AddrPort, tag string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := fmt.Fprintf(c, "%s %s", tag, line); err != nil {
						return
					}
				}
			})
		}
	})
}

func ask(addr netip.AddrPort, msg string) (string, error) {
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// eventually polls cond until it holds, failing the test after pollTimeout with the
// last state describe gives.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s; last: %s", pollTimeout, what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestEndToEnd runs the real binary path against a real control plane (etcd,
// kube-apiserver, kwok turning Nodes Ready) and a real local cloud: Nodes are
// initialized from their instances, get routes for their pod CIDRs, and a Service of
// type LoadBalancer gets a VIP that forwards TCP to the nodes.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, controlplane.Options{Kwok: true})

	vipPool, nodeNet := randomPrefix(111), randomPrefix(112)
	cloudCfg := server.Config{
		StatePath:    filepath.Join(t.TempDir(), "cloud.db"),
		Token:        cloudToken,
		VIPPool:      vipPool,
		InstanceCIDR: nodeNet,
		Logger:       testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
	}
	cloudCfg.DataPlane.HealthInterval = 200 * time.Millisecond
	srv, admin := servertest.Start(t, cloudCfg)

	// Three instances, then their Nodes as a kubelet with --cloud-provider=external
	// and --node-ip registers them.
	type member struct {
		inst   *api.Instance
		ip     netip.Addr
		podNet netip.Prefix
	}
	var members []member
	for i := range 3 {
		ip := nodeNet.Addr().Next()
		for range i {
			ip = ip.Next()
		}
		spec := api.InstanceSpec{
			Name:      fmt.Sprintf("node-%d", i+1),
			Addresses: []api.Address{{Type: api.AddressInternalIP, Address: ip.String()}},
			Labels:    map[string]string{"nephele.dev/pool": "e2e"},
		}
		if i == 2 {
			spec.InstanceType = "local.large"
		}
		inst, err := admin.CreateInstance(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, member{inst: inst, ip: ip, podNet: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i+1))})
	}
	for _, m := range members {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        m.inst.Name,
				Annotations: map[string]string{annotationNodeIP: m.ip.String()},
				Labels:      map[string]string{"type": "kwok"},
			},
			Spec: corev1.NodeSpec{
				PodCIDR:  m.podNet.String(),
				PodCIDRs: []string{m.podNet.String()},
				Taints:   []corev1.Taint{{Key: taintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			},
		}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	tokenFile := writeFile(t, "token", cloudToken+"\n")
	cloudConfig := writeFile(t, "cloud.yaml", fmt.Sprintf("endpoint: %s\ntokenFile: %s\nrequestTimeout: 10s\n", srv.URL(), tokenFile))
	ccm := startCCM(t,
		"--cloud-provider=local", "--cloud-config="+cloudConfig, "--kubeconfig="+env.Kubeconfig,
		"--secure-port=0", "--leader-elect=false", "--cluster-cidr=10.244.0.0/16", "--v=2")

	// Node initialization.
	for _, m := range members {
		name := m.inst.Name
		eventually(t, name+" is initialized", func() (bool, string) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			state := fmt.Sprintf("providerID %q labels %v taints %v addresses %v", n.Spec.ProviderID, n.Labels, n.Spec.Taints, n.Status.Addresses)
			for _, tn := range n.Spec.Taints {
				if tn.Key == taintUninitialized {
					return false, state
				}
			}
			hasIP := false
			for _, a := range n.Status.Addresses {
				hasIP = hasIP || a.Type == corev1.NodeInternalIP && a.Address == m.ip.String()
			}
			ok := n.Spec.ProviderID == "local://"+m.inst.ID &&
				n.Labels[corev1.LabelTopologyZone] == m.inst.Zone &&
				n.Labels[corev1.LabelTopologyRegion] == m.inst.Region &&
				n.Labels[corev1.LabelInstanceTypeStable] == m.inst.InstanceType &&
				n.Labels["nephele.dev/pool"] == "e2e" && hasIP
			return ok, state
		})
	}
	if members[2].inst.InstanceType != "local.large" || members[0].inst.Zone == members[1].inst.Zone {
		t.Errorf("instances %+v, %+v, %+v: want distinct zones and one local.large", members[0].inst, members[1].inst, members[2].inst)
	}

	// Routes for every pod CIDR.
	eventually(t, "a route per node", func() (bool, string) {
		rs, err := admin.ListRoutes(ctx, "kubernetes")
		if err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		for _, r := range rs {
			got[r.DestinationCIDR] = r.TargetNode
		}
		for _, m := range members {
			if got[m.podNet.String()] != m.inst.Name {
				return false, fmt.Sprint(got)
			}
		}
		return len(got) == len(members), fmt.Sprint(got)
	})

	// A Service of type LoadBalancer: its VIP forwards to the node port on the nodes'
	// addresses, where echo servers stand in for kube-proxy.
	ips := make([]netip.Addr, 0, len(members))
	for _, m := range members {
		ips = append(ips, m.ip)
	}
	nodePort := freePort(t, 30000, 32768, ips...)
	for _, m := range members {
		echo(t, netip.AddrPortFrom(m.ip, nodePort), m.inst.Name)
	}
	vip := vipPool.Addr().Next()
	port := freePort(t, 20000, 29000, vip)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "echo", Protocol: corev1.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)}},
		},
	}
	if _, err := env.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service has the VIP as ingress", func() (bool, string) {
		s, err := env.Client.CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ing := s.Status.LoadBalancer.Ingress
		return len(ing) == 1 && ing[0].IP == vip.String() && ing[0].IPMode != nil && *ing[0].IPMode == corev1.LoadBalancerIPModeVIP,
			fmt.Sprintf("ingress %+v finalizers %v", ing, s.Finalizers)
	})
	front := netip.AddrPortFrom(vip, port)
	seen := map[string]bool{}
	eventually(t, "the VIP forwards to every node", func() (bool, string) {
		a, err := ask(front, "ping")
		if err == nil && strings.HasSuffix(a, " ping") {
			seen[strings.TrimSuffix(a, " ping")] = true
		}
		return len(seen) == len(members), fmt.Sprintf("answered by %v, last error %v", seen, err)
	})

	// Deleting the Service deletes the load balancer, then the finalizer goes.
	if err := env.Client.CoreV1().Services("default").Delete(ctx, "echo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the load balancer and the Service are gone", func() (bool, string) {
		lbs, err := admin.ListLoadBalancers(ctx, "")
		if err != nil {
			return false, err.Error()
		}
		_, gerr := env.Client.CoreV1().Services("default").Get(ctx, "echo", metav1.GetOptions{})
		return len(lbs) == 0 && gerr != nil, fmt.Sprintf("%d load balancers, service lookup %v", len(lbs), gerr)
	})

	// SIGTERM stops the manager cleanly.
	if err := ccm.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := ccm.wait(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
