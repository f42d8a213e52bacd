package smoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/handover"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcluster"
)

// smoke is one run of the checks; later checks use what earlier ones found.
type smoke struct {
	c       *localcluster.Cluster
	cfg     localcluster.Config
	out     io.Writer
	timeout time.Duration
	http    *http.Client

	vip    string
	hcPort int32 // the Service's health check node port
	lbName string

	// classSvcs are a hybrid cluster's Services, one per cloud (services).
	classSvcs []*classService

	// Real nodes only.
	probes  []probe
	serving string // the node of the one replica left after scaling down
	lost    string // the node whose instance was terminated
}

// nodeChecks are the checks that the CCM initialized each node.
func (s *smoke) nodeChecks() []check {
	var list []check
	for _, n := range s.c.Nodes {
		if !n.Owned() {
			continue
		}
		list = append(list, check{"node " + n.Name + " initialized by the CCM", func(ctx context.Context) (string, error) {
			return s.nodeInitialized(ctx, n.Name)
		}})
	}
	return list
}

func (s *smoke) nodeInitialized(ctx context.Context, name string) (string, error) {
	var node *corev1.Node
	err := s.eventually(ctx, func(ctx context.Context) error {
		var err error
		if node, err = s.c.Env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
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
	return fmt.Sprintf("%s, zone %s, type %s, %s", node.Spec.ProviderID,
		node.Labels[corev1.LabelTopologyZone], node.Labels[corev1.LabelInstanceTypeStable], nodeAddresses(node)), nil
}

func nodeAddresses(n *corev1.Node) string {
	var a []string
	for _, addr := range n.Status.Addresses {
		a = append(a, string(addr.Type)+" "+addr.Address)
	}
	return strings.Join(a, ", ")
}

// routeOf returns the cloud's route to node's pod CIDR, nil when there is none.
func (s *smoke) routeOf(ctx context.Context, node string) (*api.Route, string, error) {
	obj, err := s.c.Env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	if obj.Spec.PodCIDR == "" {
		return nil, "", fmt.Errorf("node %s has no pod CIDR yet", node)
	}
	routes, err := s.c.Cloud.ListRoutes(ctx, s.cfg.ClusterName)
	if err != nil {
		return nil, "", err
	}
	for i, r := range routes {
		if r.DestinationCIDR == obj.Spec.PodCIDR && r.TargetNode == node {
			return &routes[i], obj.Spec.PodCIDR, nil
		}
	}
	return nil, obj.Spec.PodCIDR, nil
}

// routes waits until every node's pod CIDR is routed to it in the cloud.
func (s *smoke) routes(ctx context.Context) (string, error) {
	var got []string
	err := s.eventually(ctx, func(ctx context.Context) error {
		got = got[:0]
		for _, n := range s.c.Nodes {
			if n.Name == s.lost {
				continue
			}
			r, cidr, err := s.routeOf(ctx, n.Name)
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("node %s: no route for its pod CIDR %q", n.Name, cidr)
			}
			got = append(got, cidr+" -> "+n.Name)
		}
		return nil
	})
	return strings.Join(got, ", "), err
}

// createService creates the LoadBalancer Service of the checks, with
// externalTrafficPolicy Local (the cloud health-checks each node on the Service's health
// check node port: kube-proxy's, or the node agent's), and waits for its ingress IP.
func (s *smoke) createService(ctx context.Context, ports []corev1.ServicePort) (string, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Selector:              map[string]string{"app": ServiceName},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 ports,
		},
	}
	services := s.c.Env.Client.CoreV1().Services(Namespace)
	if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Service: %w", err)
	}
	err := s.eventually(ctx, func(ctx context.Context) error {
		got, err := services.Get(ctx, ServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.hcPort = got.Spec.HealthCheckNodePort
		for _, ing := range got.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				s.vip = ing.IP
				return nil
			}
		}
		return errors.New("no ingress IP in the Service's status yet")
	})
	return fmt.Sprintf("%s, health check node port %d", s.vip, s.hcPort), err
}

// loadBalancer waits until the cloud's load balancer of the Service has the VIP, a
// backend on every node still in the cluster, and healthy(backend) holds for each.
func (s *smoke) loadBalancer(ctx context.Context, healthy func(api.BackendStatus) error) (api.LoadBalancer, error) {
	nodes := s.clusterNodes()
	var lb api.LoadBalancer
	err := s.eventually(ctx, func(ctx context.Context) error {
		lbs, err := s.c.Cloud.ListLoadBalancers(ctx, s.cfg.ClusterName)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(lbs, func(lb api.LoadBalancer) bool { return lb.Spec.Service == Namespace+"/"+ServiceName })
		if i < 0 {
			return fmt.Errorf("no load balancer for %s/%s among %d", Namespace, ServiceName, len(lbs))
		}
		lb = lbs[i]
		if lb.Spec.HealthCheckNodePort != s.hcPort || s.hcPort == 0 {
			return fmt.Errorf("load balancer %s health-checks port %d, the Service's health check node port is %d", lb.Name, lb.Spec.HealthCheckNodePort, s.hcPort)
		}
		if lb.Status.VIP != s.vip {
			return fmt.Errorf("load balancer %s has VIP %s, the Service says %s", lb.Name, lb.Status.VIP, s.vip)
		}
		var have []string
		for _, b := range lb.Status.Backends {
			have = append(have, b.NodeName)
			if err := healthy(b); err != nil {
				return err
			}
		}
		sort.Strings(have)
		if !slices.Equal(have, nodes) {
			return fmt.Errorf("load balancer %s has backends %v, want %v", lb.Name, have, nodes)
		}
		return nil
	})
	s.lbName = lb.Name
	return lb, err
}

// everyBackendHealthy waits until the cloud finds every node healthy.
func (s *smoke) everyBackendHealthy(ctx context.Context) (string, error) {
	lb, err := s.loadBalancer(ctx, func(b api.BackendStatus) error {
		if b.Health != api.HealthHealthy {
			return fmt.Errorf("backend %s (%s) is %s", b.NodeName, b.Address, b.Health)
		}
		return nil
	})
	return fmt.Sprintf("%s: %s", lb.Name, describeBackends(lb)), err
}

// ownedNodes are the names of the nodes a cloud of the CCM owns, sorted: every node but a
// hybrid cluster's unowned one.
func (s *smoke) ownedNodes() []string {
	var out []string
	for _, n := range s.c.Nodes {
		if n.Owned() {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// clusterNodes are the names of the nodes still in the cluster, sorted.
func (s *smoke) clusterNodes() []string {
	var out []string
	for _, n := range s.c.Nodes {
		if n.Name != s.lost {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

func describeBackends(lb api.LoadBalancer) string {
	var parts []string
	for _, b := range lb.Status.Backends {
		parts = append(parts, fmt.Sprintf("%s %s", b.NodeName, b.Health))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// migrateCheck makes the checks of `nephele migrate check` on the cluster: every Node
// initialized with a local:// provider ID, the LoadBalancer Service owned by nephele,
// nephele holding its lease, nothing held by kube-controller-manager.
func (s *smoke) migrateCheck(ctx context.Context) (string, error) {
	snap, err := handover.Survey(ctx, s.c.Env.Client, handover.DefaultNamespace, time.Now())
	if err != nil {
		return "", err
	}
	v := handover.Check(snap, handover.CheckOptions{Provider: "local", UninitializedBound: handover.DefaultUninitializedBound})
	if failed := v.Failed(); len(failed) > 0 {
		var b strings.Builder
		if err := v.WriteText(&b); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%d failed:\n%s", len(failed), b.String())
	}
	return fmt.Sprintf("%d checks passed", len(v.Results)), nil
}

// deleteService deletes the Service and waits until the cloud's load balancer is gone
// and the Service with it (the finalizer goes once the load balancer is gone).
func (s *smoke) deleteService(ctx context.Context) (string, error) {
	services := s.c.Env.Client.CoreV1().Services(Namespace)
	if err := services.Delete(ctx, ServiceName, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete Service: %w", err)
	}
	err := s.eventually(ctx, func(ctx context.Context) error {
		_, err := s.c.Cloud.GetLoadBalancer(ctx, s.lbName)
		switch {
		case errors.Is(err, cloud.ErrNotFound):
		case err != nil:
			return err
		default:
			return fmt.Errorf("load balancer %s still exists", s.lbName)
		}
		if _, err := services.Get(ctx, ServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Service is still there (get: %v)", err)
		}
		return nil
	})
	return "load balancer " + s.lbName + " is gone, and the Service with it", err
}

// listenerClosed waits until nothing accepts TCP connections at the VIP's port: the
// proxy's listener is closed, or the kernel data plane refuses the port.
func (s *smoke) listenerClosed(port int) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		addr := net.JoinHostPort(s.vip, fmt.Sprint(port))
		var dialErr error
		err := s.eventually(ctx, func(ctx context.Context) error {
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
}

// get makes one HTTP GET through the VIP and returns the body of a 200 answer.
func (s *smoke) get(ctx context.Context, port int) ([]byte, error) { return s.getAt(ctx, s.vip, port) }

// getAt makes one HTTP GET to vip:port and returns the body of a 200 answer.
func (s *smoke) getAt(ctx context.Context, vip string, port int) ([]byte, error) {
	url := "http://" + net.JoinHostPort(vip, fmt.Sprint(port)) + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s %q", url, resp.Status, raw)
	}
	return raw, nil
}
