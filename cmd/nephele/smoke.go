package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcluster"
)

// The smoke Service. Its ports are above 1024, which the local cloud's data plane can
// bind without privileges.
const (
	smokeNamespace = "default"
	smokeName      = "nephele-smoke"
	smokeTCPPort   = 8080
	smokeUDPPort   = 8053
)

// smoke is one run of the smoke checks; later checks use what earlier ones found.
type smoke struct {
	c      *cluster
	http   *http.Client
	vip    string
	lbName string
}

// runSmoke runs the smoke checks in order, printing each with PASS or FAIL, and stops at
// the first failure: later checks build on earlier ones.
func runSmoke(ctx context.Context, c *cluster, out io.Writer) error {
	s := &smoke{c: c, http: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		Proxy:             nil, // the VIP is local: never ask an environment's proxy
		DisableKeepAlives: true,
	}}}
	ck := &checks{w: out}
	fmt.Fprintln(out, "smoke checks:")
	type check struct {
		name string
		fn   func(context.Context) (string, error)
	}
	var list []check
	for _, n := range c.nodes {
		list = append(list, check{"node " + n.Name + " initialized by the CCM", func(ctx context.Context) (string, error) {
			return s.nodeInitialized(ctx, n.Name)
		}})
	}
	list = append(list,
		check{"every node's Pod CIDR routed in the local cloud", s.routes},
		check{"Service " + smokeNamespace + "/" + smokeName + " (type LoadBalancer) gets an ingress IP", s.ingressIP},
		check{"the local cloud has its load balancer, every backend healthy", s.cloudLoadBalancer},
		check{"HTTP GET through the VIP is answered by a node agent", s.httpGet},
		check{"a UDP datagram through the VIP is echoed", s.udpEcho},
		check{"deleting the Service deletes the cloud load balancer", s.deleteService},
		check{"the VIP's listener is closed", s.listenerClosed},
	)
	var err error
	for _, chk := range list {
		cctx, cancel := context.WithTimeoutCause(ctx, c.opts.timeout, fmt.Errorf("not done within --timeout %s", c.opts.timeout))
		err = ck.run(cctx, chk.name, chk.fn)
		cancel()
		if err != nil {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(out, "smoke: FAILED (%d passed, %d failed, %d not run); logs in %s\n",
			ck.passed, ck.failed, len(list)-ck.passed-ck.failed, c.runDir())
		return err
	}
	fmt.Fprintf(out, "smoke: PASSED (%d checks)\n", ck.passed)
	return nil
}

// eventually polls fn until it succeeds or ctx ends; the error then is fn's last.
func eventually(ctx context.Context, fn func(context.Context) error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", context.Cause(ctx), err)
		case <-tick.C:
		}
	}
}

func (s *smoke) nodeInitialized(ctx context.Context, name string) (string, error) {
	var node *corev1.Node
	err := eventually(ctx, func(ctx context.Context) error {
		var err error
		if node, err = s.c.env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if ok, why := localcluster.Initialized(node); !ok {
			return errors.New(why)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, zone %s, type %s", node.Spec.ProviderID,
		node.Labels[corev1.LabelTopologyZone], node.Labels[corev1.LabelInstanceTypeStable]), nil
}

func (s *smoke) routes(ctx context.Context) (string, error) {
	var n int
	err := eventually(ctx, func(ctx context.Context) error {
		routes, err := s.c.cloud.ListRoutes(ctx, clusterName)
		if err != nil {
			return err
		}
		have := map[string]string{} // destination -> node
		for _, r := range routes {
			have[r.DestinationCIDR] = r.TargetNode
		}
		n = 0
		for _, node := range s.c.nodes {
			obj, err := s.c.env.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if obj.Spec.PodCIDR == "" {
				return fmt.Errorf("node %s has no Pod CIDR yet", node.Name)
			}
			if got := have[obj.Spec.PodCIDR]; got != node.Name {
				return fmt.Errorf("node %s: its Pod CIDR %s is routed to %q", node.Name, obj.Spec.PodCIDR, got)
			}
			n++
		}
		return nil
	})
	return fmt.Sprintf("%d routes in %s", n, s.c.opts.clusterCIDR), err
}

func (s *smoke) ingressIP(ctx context.Context) (string, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: smokeNamespace, Name: smokeName},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": smokeName},
			// Local makes the cloud health-check the nodes on the health check node
			// port, which the node agents answer.
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: smokeTCPPort, TargetPort: intstr.FromInt32(smokeTCPPort)},
				{Name: "echo", Protocol: corev1.ProtocolUDP, Port: smokeUDPPort, TargetPort: intstr.FromInt32(smokeUDPPort)},
			},
		},
	}
	services := s.c.env.Client.CoreV1().Services(smokeNamespace)
	if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Service: %w", err)
	}
	err := eventually(ctx, func(ctx context.Context) error {
		got, err := services.Get(ctx, smokeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ing := range got.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				s.vip = ing.IP
				return nil
			}
		}
		return errors.New("no ingress IP in the Service's status yet")
	})
	return s.vip, err
}

func (s *smoke) cloudLoadBalancer(ctx context.Context) (string, error) {
	var lb api.LoadBalancer
	err := eventually(ctx, func(ctx context.Context) error {
		lbs, err := s.c.cloud.ListLoadBalancers(ctx, clusterName)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(lbs, func(lb api.LoadBalancer) bool { return lb.Spec.Service == smokeNamespace+"/"+smokeName })
		if i < 0 {
			return fmt.Errorf("no load balancer for %s/%s among %d", smokeNamespace, smokeName, len(lbs))
		}
		lb = lbs[i]
		if lb.Status.VIP != s.vip {
			return fmt.Errorf("load balancer %s has VIP %s, the Service says %s", lb.Name, lb.Status.VIP, s.vip)
		}
		if len(lb.Status.Backends) != len(s.c.nodes) {
			return fmt.Errorf("load balancer %s has %d backends, want %d", lb.Name, len(lb.Status.Backends), len(s.c.nodes))
		}
		for _, b := range lb.Status.Backends {
			if b.Health != api.HealthHealthy {
				return fmt.Errorf("backend %s (%s) is %s", b.NodeName, b.Address, b.Health)
			}
		}
		return nil
	})
	s.lbName = lb.Name
	return fmt.Sprintf("%s, VIP %s, %d/%d backends healthy", lb.Name, lb.Status.VIP, len(lb.Status.Backends), len(s.c.nodes)), err
}

func (s *smoke) httpGet(ctx context.Context) (string, error) {
	url := "http://" + net.JoinHostPort(s.vip, strconv.Itoa(smokeTCPPort)) + "/"
	var body string
	err := eventually(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := s.http.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if err != nil {
			return err
		}
		body = strings.TrimSpace(string(raw))
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "(nephele node agent)") {
			return fmt.Errorf("GET %s: %s %q", url, resp.Status, body)
		}
		return nil
	})
	return fmt.Sprintf("GET %s: %q", url, body), err
}

func (s *smoke) udpEcho(ctx context.Context) (string, error) {
	addr := net.JoinHostPort(s.vip, strconv.Itoa(smokeUDPPort))
	msg := "nephele smoke " + strconv.FormatInt(time.Now().UnixNano(), 36)
	err := eventually(ctx, func(ctx context.Context) error {
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

func (s *smoke) deleteService(ctx context.Context) (string, error) {
	return deleteSmokeService(ctx, s.c.env.Client, s.c.cloud, s.lbName)
}

func (s *smoke) listenerClosed(ctx context.Context) (string, error) {
	return listenerClosed(ctx, net.JoinHostPort(s.vip, strconv.Itoa(smokeTCPPort)))
}

// deleteSmokeService deletes the smoke Service and waits until the cloud's load
// balancer lbName is gone and the Service with it: both smoke runs end this way.
func deleteSmokeService(ctx context.Context, kube kubernetes.Interface, lbs *client.Client, lbName string) (string, error) {
	services := kube.CoreV1().Services(smokeNamespace)
	if err := services.Delete(ctx, smokeName, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete Service: %w", err)
	}
	err := eventually(ctx, func(ctx context.Context) error {
		_, err := lbs.GetLoadBalancer(ctx, lbName)
		switch {
		case errors.Is(err, cloud.ErrNotFound):
		case err != nil:
			return err
		default:
			return fmt.Errorf("load balancer %s still exists", lbName)
		}
		// The finalizer goes once the load balancer is gone, and with it the Service.
		if _, err := services.Get(ctx, smokeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Service is still there (get: %v)", err)
		}
		return nil
	})
	return "load balancer " + lbName + " is gone, and the Service with it", err
}

// listenerClosed waits until nothing accepts TCP connections at addr (a VIP's port).
func listenerClosed(ctx context.Context, addr string) (string, error) {
	var dialErr error
	err := eventually(ctx, func(ctx context.Context) error {
		d := net.Dialer{Timeout: 2 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			dialErr = err
			return nil
		}
		conn.Close()
		return fmt.Errorf("%s still accepts connections", addr)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("connect %s: %v", addr, errors.Unwrap(dialErr)), nil
}
