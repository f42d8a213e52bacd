package smoke

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ports of the Service of kwok nodes' checks, above 1024: the local cloud's data plane
// binds its VIPs without privileges.
const (
	kwokTCPPort = 8080
	kwokUDPPort = 8053
)

// kwokChecks are the checks of a cluster of kwok nodes, after the CCM started: no pod
// runs, and the node agent answers on the Service's node ports in place of kube-proxy.
func (s *smoke) kwokChecks() []check {
	return append(s.nodeChecks(),
		check{"every node's pod CIDR routed in the local cloud", s.routes},
		check{"Service " + Namespace + "/" + ServiceName + " (LoadBalancer, externalTrafficPolicy Local) gets an ingress IP", s.agentService},
		check{"the cloud's load balancer health-checks the node agent: every node healthy", s.everyBackendHealthy},
		check{"HTTP GET through the VIP is answered by a node agent", s.agentHTTP},
		check{"a UDP datagram through the VIP is echoed", s.agentUDP},
		check{"nephele migrate check passes", s.migrateCheck},
		check{"deleting the Service deletes the cloud load balancer", s.deleteService},
		check{"the VIP's listener is closed", s.listenerClosed(kwokTCPPort)},
	)
}

// agentService creates the Service the node agent answers for: HTTP and a UDP echo.
func (s *smoke) agentService(ctx context.Context) (string, error) {
	return s.createService(ctx, []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: kwokTCPPort, TargetPort: intstr.FromInt32(kwokTCPPort)},
		{Name: "echo", Protocol: corev1.ProtocolUDP, Port: kwokUDPPort, TargetPort: intstr.FromInt32(kwokUDPPort)},
	})
}

// agentHTTP waits until an HTTP GET through the VIP is answered by a node agent.
func (s *smoke) agentHTTP(ctx context.Context) (string, error) {
	var body string
	err := s.eventually(ctx, func(ctx context.Context) error {
		raw, err := s.get(ctx, kwokTCPPort)
		if err != nil {
			return err
		}
		body = strings.TrimSpace(string(raw))
		if !strings.Contains(body, "(nephele node agent)") {
			return fmt.Errorf("answered %q, not by a node agent", body)
		}
		return nil
	})
	return fmt.Sprintf("%q", body), err
}

// agentUDP waits until a datagram sent through the VIP comes back.
func (s *smoke) agentUDP(ctx context.Context) (string, error) {
	addr := net.JoinHostPort(s.vip, strconv.Itoa(kwokUDPPort))
	msg := "nephele smoke " + strconv.FormatInt(time.Now().UnixNano(), 36)
	err := s.eventually(ctx, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "udp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
			return err
		}
		if _, err := conn.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, 1024)
		n, err := conn.Read(buf)
		if err != nil {
			return err
		}
		if got := string(buf[:n]); got != msg {
			return fmt.Errorf("got %q back, want %q", got, msg)
		}
		return nil
	})
	return addr, err
}
