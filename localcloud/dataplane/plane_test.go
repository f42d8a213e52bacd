package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
)

func TestTCPForwardsRoundRobin(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA, nodeB)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	tcpEcho(t, netip.AddrPortFrom(nodeB, nodePort), "b")
	vip := testVIP()
	port := freePort(t, TCP, vip)
	apply(t, p, LoadBalancer{
		Name:     "web",
		VIP:      vip,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}, {NodeName: "b", Addr: nodeB}},
	})
	poll.Eventually(t, "both backends healthy", healthy(p, "web", HealthHealthy, nodeA, nodeB))

	seen := map[string]int{}
	for range 6 {
		answer, err := askTCP(netip.AddrPortFrom(vip, port), netip.Addr{}, "hello")
		if err != nil {
			t.Fatalf("asking through the VIP: %v", err)
		}
		if !strings.HasSuffix(answer, " hello") {
			t.Fatalf("answer %q does not echo the request", answer)
		}
		seen[tagOf(answer)]++
	}
	if seen["a"] != 3 || seen["b"] != 3 {
		t.Errorf("round robin over two healthy backends gave %v, want 3 each", seen)
	}
}

// TestClientIPAffinity: with affinity, every connection and UDP session of one client
// address goes to one backend.
func TestClientIPAffinity(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA, nodeB)
	udpPort := freePort(t, UDP, nodeA, nodeB)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	tcpEcho(t, netip.AddrPortFrom(nodeB, nodePort), "b")
	udpEcho(t, netip.AddrPortFrom(nodeA, udpPort), "a")
	udpEcho(t, netip.AddrPortFrom(nodeB, udpPort), "b")
	vip := testVIP()
	port := freePort(t, TCP, vip)
	uport := freePort(t, UDP, vip)
	apply(t, p, LoadBalancer{
		Name: "web", VIP: vip, AffinityTimeout: time.Hour,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: nodePort}, {Protocol: UDP, Port: uport, NodePort: udpPort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}, {NodeName: "b", Addr: nodeB}},
	})
	poll.Eventually(t, "both backends healthy", healthy(p, "web", HealthHealthy, nodeA, nodeB))
	for _, from := range []netip.Addr{client, other} {
		seen := map[string]int{}
		for range 6 {
			answer, err := askTCP(netip.AddrPortFrom(vip, port), from, "hello")
			if err != nil {
				t.Fatalf("asking through the VIP from %s: %v", from, err)
			}
			seen[tagOf(answer)]++
		}
		for range 3 {
			c := newUDPClient(t, from, netip.AddrPortFrom(vip, uport))
			answer, err := c.Ask("hello", 5*time.Second)
			if err != nil {
				t.Fatalf("asking UDP through the VIP from %s: %v", from, err)
			}
			seen[tagOf(answer)]++
		}
		if len(seen) != 1 {
			t.Errorf("connections from %s went to %v, want one backend", from, seen)
		}
	}
}

func TestTCPSkipsUnhealthyBackends(t *testing.T) {
	tests := []struct {
		name string
		// setup starts the backends and returns the health check node port (0 for
		// TCP connect checks).
		setup func(t *testing.T, nodePort uint16) (hcPort uint16)
	}{
		{
			name: "closed node port fails the TCP check",
			setup: func(t *testing.T, nodePort uint16) uint16 {
				tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
				return 0 // nothing listens on nodeB
			},
		},
		{
			name: "health check node port answering 503",
			setup: func(t *testing.T, nodePort uint16) uint16 {
				// Both accept connections: only the health check can keep b out.
				tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
				tcpEcho(t, netip.AddrPortFrom(nodeB, nodePort), "b")
				hc := freePort(t, TCP, nodeA, nodeB)
				healthz(t, netip.AddrPortFrom(nodeA, hc), http.StatusOK)
				healthz(t, netip.AddrPortFrom(nodeB, hc), http.StatusServiceUnavailable)
				return hc
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newTestPlane(t)
			nodePort := freePort(t, TCP, nodeA, nodeB)
			hc := tt.setup(t, nodePort)
			vip := testVIP()
			port := freePort(t, TCP, vip)
			apply(t, p, LoadBalancer{
				Name:                "web",
				VIP:                 vip,
				Ports:               []Port{{Protocol: TCP, Port: port, NodePort: nodePort}},
				Backends:            []Backend{{NodeName: "a", Addr: nodeA}, {NodeName: "b", Addr: nodeB}},
				HealthCheckNodePort: hc,
			})
			poll.Eventually(t, "b unhealthy and a healthy", func() error {
				return errors.Join(healthy(p, "web", HealthUnhealthy, nodeB)(), healthy(p, "web", HealthHealthy, nodeA)())
			})
			for i := range 6 {
				answer, err := askTCP(netip.AddrPortFrom(vip, port), netip.Addr{}, "hi")
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if tagOf(answer) != "a" {
					t.Fatalf("request %d answered by %q, want only the healthy backend a", i, answer)
				}
			}
		})
	}
}

func TestAllBackendsUnhealthyFailsOpen(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	hc := freePort(t, TCP, nodeA)
	healthz(t, netip.AddrPortFrom(nodeA, hc), http.StatusServiceUnavailable)
	vip := testVIP()
	port := freePort(t, TCP, vip)
	apply(t, p, LoadBalancer{
		Name: "web", VIP: vip, HealthCheckNodePort: hc,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}},
	})
	poll.Eventually(t, "a unhealthy", healthy(p, "web", HealthUnhealthy, nodeA))
	answer, err := askTCP(netip.AddrPortFrom(vip, port), netip.Addr{}, "x")
	if err != nil || tagOf(answer) != "a" {
		t.Fatalf("with every backend unhealthy traffic should still reach them: %q, %v", answer, err)
	}
}

func TestUDPForwardsPerClientSessions(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, UDP, nodeA, nodeB)
	udpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	udpEcho(t, netip.AddrPortFrom(nodeB, nodePort), "b")
	vip := testVIP()
	port := freePort(t, UDP, vip)
	apply(t, p, LoadBalancer{
		Name:     "dns",
		VIP:      vip,
		Ports:    []Port{{Protocol: UDP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}, {NodeName: "b", Addr: nodeB}},
	})
	to := netip.AddrPortFrom(vip, port)
	c1, c2 := newUDPClient(t, client, to), newUDPClient(t, client, to)

	first1 := c1.AskUntil(t, "one")
	first2 := c2.AskUntil(t, "two")
	if !strings.HasSuffix(first1, " one") || !strings.HasSuffix(first2, " two") {
		t.Fatalf("answers %q, %q do not echo the requests", first1, first2)
	}
	if tagOf(first1) == tagOf(first2) {
		t.Errorf("two clients both went to %q; want round robin over the backends", tagOf(first1))
	}
	// A client's datagrams stay on its session's backend.
	for i := range 5 {
		again, err := c1.Ask("more", testnet.AnswerTimeout)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if tagOf(again) != tagOf(first1) {
			t.Fatalf("datagram %d of one client answered by %q, then %q", i, tagOf(first1), tagOf(again))
		}
	}
}

func TestUDPSessionsEndWhenIdle(t *testing.T) {
	// Idle for a second: a shorter timeout could end the session before the test counts it.
	p, _ := newTestPlane(t, func(c *Config) { c.UDPIdleTimeout = time.Second })
	nodePort := freePort(t, UDP, nodeA)
	udpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	vip := testVIP()
	port := freePort(t, UDP, vip)
	apply(t, p, LoadBalancer{
		Name: "dns", VIP: vip,
		Ports:    []Port{{Protocol: UDP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}},
	})
	c := newUDPClient(t, client, netip.AddrPortFrom(vip, port))
	c.AskUntil(t, "ping")
	l := udpListenerOf(t, p, "dns", port)
	if n := l.sessionCount(); n != 1 {
		t.Fatalf("sessions after one exchange = %d, want 1", n)
	}
	poll.Eventually(t, "the idle session to end", func() error {
		if n := l.sessionCount(); n != 0 {
			return fmt.Errorf("%d sessions", n)
		}
		return nil
	})
	// The client is not stuck: a new session opens.
	if answer := c.AskUntil(t, "again"); answer != "a again" {
		t.Fatalf("answer after the idle timeout = %q", answer)
	}
}

func udpListenerOf(t *testing.T, p *Proxy, lb string, port uint16) *udpListener {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.lbs[lb].listeners[listenerKey{UDP, port}].(*udpListener)
	if !ok {
		t.Fatalf("no UDP listener on port %d of %s", port, lb)
	}
	return l
}

func (l *udpListener) sessionCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions)
}

func TestSourceRangesRefuseOtherClients(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	udpNodePort := freePort(t, UDP, nodeA)
	udpEcho(t, netip.AddrPortFrom(nodeA, udpNodePort), "a")
	vip := testVIP()
	port := freePort(t, TCP, vip)
	udpPort := freePort(t, UDP, vip)
	apply(t, p, LoadBalancer{
		Name: "private",
		VIP:  vip,
		Ports: []Port{
			{Protocol: TCP, Port: port, NodePort: nodePort},
			{Protocol: UDP, Port: udpPort, NodePort: udpNodePort},
		},
		Backends:     []Backend{{NodeName: "a", Addr: nodeA}},
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")},
	})

	t.Run("TCP", func(t *testing.T) {
		if answer, err := askTCP(netip.AddrPortFrom(vip, port), client, "in"); err != nil || answer != "a in" {
			t.Fatalf("allowed client: %q, %v", answer, err)
		}
		answer, err := askTCP(netip.AddrPortFrom(vip, port), other, "out")
		if err == nil {
			t.Fatalf("client from %s outside the source ranges got %q", other, answer)
		}
		poll.Eventually(t, "the connection counted as rejected", func() error {
			if n := rejected(p, "private", TCP, reasonSourceRange); n != 1 {
				return fmt.Errorf("%v rejected", n)
			}
			return nil
		})
	})
	t.Run("UDP", func(t *testing.T) {
		in := newUDPClient(t, client, netip.AddrPortFrom(vip, udpPort))
		if answer := in.AskUntil(t, "in"); answer != "a in" {
			t.Fatalf("allowed client got %q", answer)
		}
		out := newUDPClient(t, other, netip.AddrPortFrom(vip, udpPort))
		answer, err := out.Ask("out", 300*time.Millisecond)
		if err == nil {
			t.Fatalf("client from %s outside the source ranges got %q", other, answer)
		}
		if !isTimeout(err) {
			t.Fatalf("refused client: want no answer at all, got %v", err)
		}
		poll.Eventually(t, "the datagram counted as rejected", func() error {
			if n := rejected(p, "private", UDP, reasonSourceRange); n < 1 {
				return fmt.Errorf("%v rejected", n)
			}
			return nil
		})
	})
}

func TestPortConflictAppliesNothing(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA, nodeB)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	tcpEcho(t, netip.AddrPortFrom(nodeB, nodePort), "b")
	vip := testVIP()
	free := freePort(t, TCP, vip)
	taken := freePort(t, TCP, vip)
	for taken == free {
		taken = freePort(t, TCP, vip)
	}
	squatter, err := net.Listen("tcp", netip.AddrPortFrom(vip, taken).String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = squatter.Close() }()

	commits := 0
	commit := func() error { commits++; return nil }
	conflicting := LoadBalancer{
		Name: "web", VIP: vip,
		Ports:    []Port{{Protocol: TCP, Port: free, NodePort: nodePort}, {Protocol: TCP, Port: taken, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "b", Addr: nodeB}},
	}

	t.Run("new load balancer", func(t *testing.T) {
		err := p.Apply(context.Background(), conflicting, commit)
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Addr != netip.AddrPortFrom(vip, taken) {
			t.Fatalf("Apply = %v, want a *ConflictError for %s", err, netip.AddrPortFrom(vip, taken))
		}
		if commits != 0 {
			t.Errorf("commit ran %d times after a failed listen", commits)
		}
		if _, ok := p.Health("web"); ok {
			t.Errorf("the load balancer is running after a failed Apply")
		}
		if listening(netip.AddrPortFrom(vip, free)) {
			t.Errorf("the free port's listener stayed open after the conflict")
		}
	})

	t.Run("update of a running load balancer", func(t *testing.T) {
		apply(t, p, LoadBalancer{
			Name: "web", VIP: vip,
			Ports:    []Port{{Protocol: TCP, Port: free, NodePort: nodePort}},
			Backends: []Backend{{NodeName: "a", Addr: nodeA}},
		})
		err := p.Apply(context.Background(), conflicting, commit)
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("Apply = %v, want a *ConflictError", err)
		}
		// The old configuration (backend a only) still serves.
		for range 3 {
			answer, err := askTCP(netip.AddrPortFrom(vip, free), netip.Addr{}, "x")
			if err != nil || tagOf(answer) != "a" {
				t.Fatalf("after a failed update: %q, %v; want the old backend a", answer, err)
			}
		}
	})
}

func TestFailedCommitRollsBack(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	vip := testVIP()
	port := freePort(t, TCP, vip)
	lb := LoadBalancer{
		Name: "web", VIP: vip,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}},
	}
	boom := errors.New("disk full")
	if err := p.Apply(context.Background(), lb, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Apply = %v, want the commit error", err)
	}
	if listening(netip.AddrPortFrom(vip, port)) {
		t.Fatalf("listener open after a failed commit")
	}
	// The port is really free again.
	apply(t, p, lb)
	if answer, err := askTCP(netip.AddrPortFrom(vip, port), netip.Addr{}, "x"); err != nil || answer != "a x" {
		t.Fatalf("after a good Apply: %q, %v", answer, err)
	}
}

func TestUpdateSwitchesBackendsAndKeepsConnections(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA, nodeB)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	tcpEcho(t, netip.AddrPortFrom(nodeB, nodePort), "b")
	vip := testVIP()
	port := freePort(t, TCP, vip)
	lb := LoadBalancer{
		Name: "web", VIP: vip,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}},
	}
	apply(t, p, lb)
	long, err := net.Dial("tcp", netip.AddrPortFrom(vip, port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = long.Close() }()
	// Dial returns once the kernel accepted the connection; the proxy picks its backend
	// when it takes the connection. One round trip makes sure that happened before the
	// update.
	_ = long.SetDeadline(time.Now().Add(testnet.AnswerTimeout))
	buf := make([]byte, 64)
	if _, err := long.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := long.Read(buf); err != nil || string(buf[:n]) != "a first\n" {
		t.Fatalf("long connection before the update: %q, %v", buf[:n], err)
	}

	lb.Backends = []Backend{{NodeName: "b", Addr: nodeB}}
	apply(t, p, lb)
	if answer, err := askTCP(netip.AddrPortFrom(vip, port), netip.Addr{}, "new"); err != nil || answer != "b new" {
		t.Fatalf("new connection after the update: %q, %v; want backend b", answer, err)
	}
	// The connection opened before the update still reaches a.
	_ = long.SetDeadline(time.Now().Add(testnet.AnswerTimeout))
	if _, err := long.Write([]byte("old\n")); err != nil {
		t.Fatal(err)
	}
	n, err := long.Read(buf)
	if err != nil || string(buf[:n]) != "a old\n" {
		t.Fatalf("old connection after the update: %q, %v", buf[:n], err)
	}
}

func TestRemoveClosesListenersAndConnections(t *testing.T) {
	p, _ := newTestPlane(t)
	nodePort := freePort(t, TCP, nodeA)
	tcpEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	vip := testVIP()
	port := freePort(t, TCP, vip)
	apply(t, p, LoadBalancer{
		Name: "web", VIP: vip,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: nodePort}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}},
	})
	conn, err := net.Dial("tcp", netip.AddrPortFrom(vip, port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if answer, err := askTCP(netip.AddrPortFrom(vip, port), netip.Addr{}, "x"); err != nil || answer != "a x" {
		t.Fatalf("before Remove: %q, %v", answer, err)
	}
	_ = p.Remove(context.Background(), "web")
	if listening(netip.AddrPortFrom(vip, port)) {
		t.Errorf("VIP still listening after Remove")
	}
	_ = conn.SetReadDeadline(time.Now().Add(testnet.AnswerTimeout))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("connection through a removed load balancer: read error %v, want it closed", err)
	}
	if _, ok := p.Health("web"); ok {
		t.Errorf("Health reports a removed load balancer")
	}
	_ = p.Remove(context.Background(), "web") // removing twice is harmless
}

func TestHealthUnknownWithoutChecks(t *testing.T) {
	p, _ := newTestPlane(t, func(c *Config) { c.DisableHealthChecks = true })
	vip := testVIP()
	port := freePort(t, TCP, vip)
	apply(t, p, LoadBalancer{
		Name: "web", VIP: vip,
		Ports:    []Port{{Protocol: TCP, Port: port, NodePort: 1}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}},
	})
	hs, ok := p.Health("web")
	if !ok || len(hs) != 1 || hs[0].Health != HealthUnknown {
		t.Fatalf("Health = %v, %v; want one unknown backend", hs, ok)
	}
}

func TestApplyAfterCloseFails(t *testing.T) {
	p, _ := newTestPlane(t)
	p.Close()
	err := p.Apply(context.Background(), LoadBalancer{Name: "x", VIP: testVIP()}, nil)
	if err == nil {
		t.Fatal("Apply on a closed plane succeeded")
	}
}
