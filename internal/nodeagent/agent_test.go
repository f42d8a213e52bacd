package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
)

var testNodes = []Node{
	{Name: "node-a", Address: netip.MustParseAddr("127.0.0.1")},
	{Name: "node-b", Address: netip.MustParseAddr("127.0.0.2")},
}

// freePorts returns n distinct TCP and UDP ports free on every test node address a
// moment ago.
func freePorts(t *testing.T, n int) []int32 {
	t.Helper()
	var ports []int32
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if portFree(port) {
			ports = append(ports, int32(port))
		}
	}
	return ports
}

func portFree(port int) bool {
	for _, n := range testNodes {
		addr := netip.AddrPortFrom(n.Address, uint16(port)).String()
		if n.Address != testNodes[0].Address {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return false
			}
			l.Close()
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		pc.Close()
	}
	return true
}

type serviceOption func(*corev1.Service)

func newService(name string, typ corev1.ServiceType, opts ...serviceOption) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.ServiceSpec{Type: typ},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func withPort(name string, proto corev1.Protocol, port, nodePort int32) serviceOption {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Protocol: proto, Port: port, NodePort: nodePort})
	}
}

func withHealthCheckNodePort(port int32) serviceOption {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = port
	}
}

// startAgent runs an agent over client until the test ends, and waits until it is
// ready.
func startAgent(t *testing.T, client kubernetes.Interface) *Agent {
	t.Helper()
	a, err := New(Config{Client: client, Nodes: testNodes, Logger: testlog.New(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Run(ctx); err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	select {
	case <-a.Ready():
	case <-time.After(poll.Timeout):
		t.Fatal("agent not ready")
	}
	return a
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func get(addr netip.AddrPort, path string) (int, string, error) {
	resp, err := httpClient.Get("http://" + addr.String() + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func udpEcho(addr netip.AddrPort, msg string) (string, error) {
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

func refused(addr netip.AddrPort) error {
	c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err == nil {
		c.Close()
		return errors.New(addr.String() + " still accepts connections")
	}
	return nil
}

func at(n Node, port int32) netip.AddrPort { return netip.AddrPortFrom(n.Address, uint16(port)) }

func TestServesLoadBalancerNodePorts(t *testing.T) {
	ports := freePorts(t, 3)
	tcp, udp, health := ports[0], ports[1], ports[2]
	client := fake.NewClientset()
	a := startAgent(t, client)

	svc := newService("web", corev1.ServiceTypeLoadBalancer,
		withPort("http", corev1.ProtocolTCP, 8080, tcp),
		withPort("dns", corev1.ProtocolUDP, 53, udp),
		withHealthCheckNodePort(health))
	if _, err := client.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The agent opens a Service's listeners one at a time, in no set order: wait until
	// every one is open (the kernel then queues what arrives) before probing any, or a
	// probe of the last one races its Listen on a loaded machine.
	poll.Eventually(t, "all six node-port listeners open", func() error {
		if got := a.Listening(); len(got) != 6 {
			return fmt.Errorf("%d open: %v", len(got), got)
		}
		return nil
	})
	for _, n := range testNodes {
		poll.Eventually(t, "HTTP on "+n.Name, func() error {
			code, body, err := get(at(n, tcp), "/anything")
			if err != nil {
				return err
			}
			want := "hello from " + n.Name + " (nephele node agent): service default/web port http (8080)\n"
			if code != http.StatusOK || body != want {
				return errors.New("got " + strconv.Itoa(code) + " " + strconv.Quote(body) + ", want 200 " + strconv.Quote(want))
			}
			return nil
		})
		got, err := udpEcho(at(n, udp), "ping "+n.Name)
		if err != nil || got != "ping "+n.Name {
			t.Errorf("UDP echo on %s = %q, %v; want the datagram back", n.Name, got, err)
		}
		code, body, err := get(at(n, health), "/healthz")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /healthz on %s = %d, %v; want 200", n.Name, code, err)
		}
		var h healthAnswer
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("healthz body %q: %v", body, err)
		}
		if h.Service.Namespace != "default" || h.Service.Name != "web" || h.LocalEndpoints != 1 {
			t.Errorf("healthz body = %+v, want default/web with 1 local endpoint", h)
		}
		if code, _, err := get(at(n, health), "/other"); err != nil || code != http.StatusNotFound {
			t.Errorf("GET /other on the health port = %d, %v; want 404", code, err)
		}
	}
	if got := len(a.Listening()); got != 6 {
		t.Errorf("Listening() has %d entries, want 6 (3 per node):\n%s", got, strings.Join(a.Listening(), "\n"))
	}

	if err := client.CoreV1().Services("default").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range testNodes {
		poll.Eventually(t, "node ports closed on "+n.Name, func() error {
			return errors.Join(refused(at(n, tcp)), refused(at(n, health)))
		})
	}
	poll.Eventually(t, "nothing listed", func() error {
		if l := a.Listening(); len(l) > 0 {
			return errors.New(strings.Join(l, "; "))
		}
		return nil
	})
}

func TestServesOnlyNodePorts(t *testing.T) {
	ports := freePorts(t, 3)
	tests := []struct {
		name string
		svc  *corev1.Service
		want int // listeners per node
	}{
		{"ClusterIP", newService("cip", corev1.ServiceTypeClusterIP, withPort("", corev1.ProtocolTCP, 80, 0)), 0},
		{"NodePort", newService("np", corev1.ServiceTypeNodePort, withPort("", corev1.ProtocolTCP, 80, ports[0])), 1},
		{"LoadBalancer without node ports", newService("nonp", corev1.ServiceTypeLoadBalancer, withPort("", corev1.ProtocolTCP, 80, 0)), 0},
		{"SCTP", newService("sctp", corev1.ServiceTypeLoadBalancer, withPort("", corev1.ProtocolSCTP, 80, ports[1])), 0},
		{"health port on a NodePort Service", newService("nphc", corev1.ServiceTypeNodePort, withHealthCheckNodePort(ports[2])), 0},
	}
	a, err := New(Config{Client: fake.NewClientset(), Nodes: testNodes, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(a.wanted(tt.svc)); got != tt.want*len(testNodes) {
				t.Errorf("wanted() has %d listeners, want %d", got, tt.want*len(testNodes))
			}
		})
	}
}

func TestFollowsNodePortChanges(t *testing.T) {
	ports := freePorts(t, 2)
	client := fake.NewClientset()
	startAgent(t, client)
	svc := newService("web", corev1.ServiceTypeLoadBalancer, withPort("http", corev1.ProtocolTCP, 80, ports[0]))
	if _, err := client.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := testNodes[0]
	poll.Eventually(t, "first node port", func() error { _, _, err := get(at(n, ports[0]), "/"); return err })

	svc.Spec.Ports[0].NodePort = ports[1]
	svc.Spec.Ports[0].Name = "web"
	if _, err := client.CoreV1().Services("default").Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "second node port", func() error {
		_, body, err := get(at(n, ports[1]), "/")
		if err == nil && !strings.Contains(body, "port web (80)") {
			return errors.New("answer " + strconv.Quote(body) + " does not name the renamed port")
		}
		return err
	})
	poll.Eventually(t, "first node port closed", func() error { return refused(at(n, ports[0])) })
}

// TestRetriesPortInUse checks a node port someone else holds is served once it is free.
func TestRetriesPortInUse(t *testing.T) {
	port := freePorts(t, 1)[0]
	n := testNodes[1]
	squatter, err := net.Listen("tcp", at(n, port).String())
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	startAgent(t, client)
	svc := newService("web", corev1.ServiceTypeNodePort, withPort("", corev1.ProtocolTCP, 80, port))
	if _, err := client.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other node's port opens although this one cannot.
	poll.Eventually(t, "node-a served", func() error { _, _, err := get(at(testNodes[0], port), "/"); return err })
	squatter.Close()
	poll.Eventually(t, "node-b served after the port was freed", func() error {
		_, body, err := get(at(n, port), "/")
		if err == nil && !strings.HasPrefix(body, "hello from node-b ") {
			return errors.New("unexpected answer " + strconv.Quote(body))
		}
		return err
	})
}

func TestRunClosesListenersOnStop(t *testing.T) {
	port := freePorts(t, 1)[0]
	svc := newService("web", corev1.ServiceTypeLoadBalancer, withPort("", corev1.ProtocolTCP, 80, port))
	client := fake.NewClientset(svc)
	a, err := New(Config{Client: client, Nodes: testNodes, Logger: testlog.New(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	poll.Eventually(t, "existing Service served", func() error { _, _, err := get(at(testNodes[0], port), "/"); return err })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
	case <-time.After(poll.Timeout):
		t.Fatal("Run() did not return after its context ended")
	}
	for _, n := range testNodes {
		if err := refused(at(n, port)); err != nil {
			t.Error(err)
		}
	}
}

func TestNewChecksConfig(t *testing.T) {
	client := fake.NewClientset()
	addr := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no client", Config{Nodes: testNodes}, "client is required"},
		{"no nodes", Config{Client: client}, "no nodes"},
		{"bad name", Config{Client: client, Nodes: []Node{{Name: "Node_1", Address: addr}}}, `"Node_1"`},
		{"no address", Config{Client: client, Nodes: []Node{{Name: "node-1"}}}, "no address"},
		{"duplicate name", Config{Client: client, Nodes: []Node{{Name: "n", Address: addr}, {Name: "n", Address: netip.MustParseAddr("127.0.0.2")}}}, "listed twice"},
		{"duplicate address", Config{Client: client, Nodes: []Node{{Name: "a", Address: addr}, {Name: "b", Address: addr}}}, "two nodes"},
		{"valid", Config{Client: client, Nodes: testNodes}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
