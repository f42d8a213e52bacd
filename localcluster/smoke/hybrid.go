package smoke

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcluster"
)

// classService is one LoadBalancer Service of a hybrid cluster's checks: one per cloud,
// of that cloud's class (the first cloud's without a class: it is the default).
type classService struct {
	name  string
	class *string
	cloud *localcluster.LocalCloud
	vip   string
}

// hybridChecks are the checks of a hybrid cluster (Config.Hybrid): every owned node
// initialized by its own cloud, routed in it and reachable from pods of the other cloud,
// a load balancer of each class in its own cloud, and the unowned node left alone.
func (s *smoke) hybridChecks() (before, after []check) {
	before = []check{
		{"a probe pod runs on every node (tolerating the uninitialized taint)", s.probesRun},
		{"pod-to-pod across nodes and clouds fails: no route in either cloud yet", s.podToPodFails},
	}
	unowned := s.cfg.Hybrid.UnownedNode
	after = s.nodeChecks()
	if unowned {
		after = append(after, check{"node " + localcluster.UnownedNodeName + ", which declares platform " + localcluster.UnownedPlatform +
			", is left alone: tainted, no provider ID, no route, a NotOwned Event", s.unownedLeftAlone})
	}
	after = append(after,
		check{"every node's pod CIDR routed in the cloud that owns the node, and in no other", s.routesByOwner},
		check{"pod-to-pod across nodes and clouds works through each cloud's routes", s.podToPodWorks},
		check{"a Deployment of the demo server runs pods on every owned node", s.deployment},
		check{"a LoadBalancer Service of each class gets a VIP of its own cloud, whose load balancer holds that cloud's nodes only", s.classServices},
		check{"HTTP through each cloud's VIP reaches the demo pods", s.classVIPsAnswer},
		check{"deleting the Services deletes each cloud's load balancer", s.deleteClassServices},
	)
	if unowned {
		after = append(after, check{"node " + localcluster.UnownedNodeName + " is still left alone", s.unownedLeftAlone})
	}
	return before, after
}

// cloudNamed returns the cluster's local cloud of that name.
func (s *smoke) cloudNamed(name string) *localcluster.LocalCloud {
	for _, lc := range s.c.Clouds() {
		if lc.Name == name {
			return lc
		}
	}
	return nil
}

// unownedLeftAlone checks that nothing of the CCM touched the unowned node: it keeps the
// uninitialized taint and has no provider ID, no cloud routes to it or balances to it,
// and the node controller said why in a NotOwned Event.
func (s *smoke) unownedLeftAlone(ctx context.Context) (string, error) {
	name := localcluster.UnownedNodeName
	node, err := s.c.Env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", name, err)
	}
	if node.Spec.ProviderID != "" {
		return "", fmt.Errorf("node %s has provider ID %q", name, node.Spec.ProviderID)
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
		return "", fmt.Errorf("node %s lost its %s taint", name, cloudproviderapi.TaintExternalCloudProvider)
	}
	for _, lc := range s.c.Clouds() {
		routes, err := lc.Client.ListRoutes(ctx, s.cfg.ClusterName)
		if err != nil {
			return "", err
		}
		if i := slices.IndexFunc(routes, func(r api.Route) bool { return r.TargetNode == name }); i >= 0 {
			return "", fmt.Errorf("cloud %s routes %s to node %s", lc.Name, routes[i].DestinationCIDR, name)
		}
		lbs, err := lc.Client.ListLoadBalancers(ctx, s.cfg.ClusterName)
		if err != nil {
			return "", err
		}
		for _, lb := range lbs {
			if slices.ContainsFunc(lb.Status.Backends, func(b api.BackendStatus) bool { return b.NodeName == name }) {
				return "", fmt.Errorf("cloud %s's load balancer %s balances to node %s", lc.Name, lb.Name, name)
			}
		}
	}
	var told string
	err = s.eventually(ctx, func(ctx context.Context) error {
		events, err := s.c.Env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + name + ",reason=" + ownership.EventNotOwned})
		if err != nil {
			return err
		}
		if len(events.Items) == 0 {
			return fmt.Errorf("no %s Event on node %s", ownership.EventNotOwned, name)
		}
		told = events.Items[0].Message
		return nil
	})
	return told, err
}

// routesByOwner waits until each owned node's pod CIDR is routed to it in the cloud
// that owns it, and checks that no other cloud routes to it.
func (s *smoke) routesByOwner(ctx context.Context) (string, error) {
	var got []string
	err := s.eventually(ctx, func(ctx context.Context) error {
		got = got[:0]
		byCloud := map[string][]api.Route{}
		for _, lc := range s.c.Clouds() {
			routes, err := lc.Client.ListRoutes(ctx, s.cfg.ClusterName)
			if err != nil {
				return err
			}
			byCloud[lc.Name] = routes
		}
		for _, n := range s.c.Nodes {
			if !n.Owned() {
				continue
			}
			obj, err := s.c.Env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for cloud, routes := range byCloud {
				has := slices.ContainsFunc(routes, func(r api.Route) bool { return r.TargetNode == n.Name && r.DestinationCIDR == obj.Spec.PodCIDR })
				switch {
				case cloud == n.Cloud && !has:
					return fmt.Errorf("node %s: no route for its pod CIDR %q in its cloud %s", n.Name, obj.Spec.PodCIDR, cloud)
				case cloud != n.Cloud && slices.ContainsFunc(routes, func(r api.Route) bool { return r.TargetNode == n.Name }):
					return fmt.Errorf("cloud %s routes to node %s of cloud %s", cloud, n.Name, n.Cloud)
				}
			}
			got = append(got, fmt.Sprintf("%s -> %s in %s", obj.Spec.PodCIDR, n.Name, n.Cloud))
		}
		return nil
	})
	return strings.Join(got, ", "), err
}

// services are the Services of classServices: the first cloud's (the default, without a
// class) and the second's (its class).
func (s *smoke) services() []*classService {
	if s.classSvcs == nil {
		second := s.cloudNamed(localcluster.SecondCloud)
		s.classSvcs = []*classService{
			{name: ServiceName, cloud: s.cloudNamed(localcluster.FirstCloud)},
			{name: ServiceName + "-b", class: ptr.To(second.Class()), cloud: second},
		}
	}
	return s.classSvcs
}

// classServices creates a LoadBalancer Service of each cloud's class in front of the
// demo Deployment and waits until each has a VIP of its own cloud's pool, and that
// cloud's load balancer balances to exactly its owned nodes.
func (s *smoke) classServices(ctx context.Context) (string, error) {
	services := s.c.Env.Client.CoreV1().Services(Namespace)
	var got []string
	for _, cs := range s.services() {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: cs.name},
			Spec: corev1.ServiceSpec{
				Type:              corev1.ServiceTypeLoadBalancer,
				LoadBalancerClass: cs.class,
				Selector:          map[string]string{"app": ServiceName},
				Ports:             []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: demoPort, TargetPort: intstr.FromInt32(demoPort)}},
			},
		}
		if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create Service %s: %w", cs.name, err)
		}
		var want []string
		for _, n := range s.c.Nodes {
			if n.Owned() && n.Cloud == cs.cloud.Name {
				want = append(want, n.Name)
			}
		}
		sort.Strings(want)
		err := s.eventually(ctx, func(ctx context.Context) error {
			live, err := services.Get(ctx, cs.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(live.Status.LoadBalancer.Ingress) == 0 {
				return fmt.Errorf("no ingress yet for Service %s", cs.name)
			}
			cs.vip = live.Status.LoadBalancer.Ingress[0].IP
			vip, err := netip.ParseAddr(cs.vip)
			if err != nil || !cs.cloud.VIPPool.Contains(vip) {
				return fmt.Errorf("VIP %q of Service %s is not of cloud %s's pool %s", cs.vip, cs.name, cs.cloud.Name, cs.cloud.VIPPool)
			}
			lbs, err := cs.cloud.Client.ListLoadBalancers(ctx, s.cfg.ClusterName)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(lbs, func(lb api.LoadBalancer) bool { return lb.Spec.Service == Namespace+"/"+cs.name })
			if i < 0 {
				return fmt.Errorf("cloud %s has no load balancer for Service %s", cs.cloud.Name, cs.name)
			}
			var have []string
			for _, b := range lbs[i].Status.Backends {
				have = append(have, b.NodeName)
			}
			sort.Strings(have)
			if !slices.Equal(have, want) {
				return fmt.Errorf("cloud %s's load balancer of %s has backends %v, want its nodes %v", cs.cloud.Name, cs.name, have, want)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		got = append(got, fmt.Sprintf("%s: %s of %s, backends %s", cs.name, cs.vip, cs.cloud.Name, strings.Join(want, " ")))
	}
	return strings.Join(got, "; "), nil
}

// classVIPsAnswer makes requests through each Service's VIP until a demo pod answers.
func (s *smoke) classVIPsAnswer(ctx context.Context) (string, error) {
	var got []string
	for _, cs := range s.services() {
		var a demoAnswer
		err := s.eventually(ctx, func(ctx context.Context) error {
			var err error
			if a, err = s.getDemoAt(ctx, cs.vip); err == nil && a.Pod == "" {
				err = errors.New("an answer naming no pod")
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("through %s's VIP %s: %w", cs.name, cs.vip, err)
		}
		got = append(got, fmt.Sprintf("%s answered by %s on %s", cs.vip, a.Pod, a.Node))
	}
	return strings.Join(got, ", "), nil
}

// deleteClassServices deletes the Services and waits until neither cloud has a load
// balancer for them.
func (s *smoke) deleteClassServices(ctx context.Context) (string, error) {
	for _, cs := range s.services() {
		err := s.c.Env.Client.CoreV1().Services(Namespace).Delete(ctx, cs.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete Service %s: %w", cs.name, err)
		}
	}
	err := s.eventually(ctx, func(ctx context.Context) error {
		for _, lc := range s.c.Clouds() {
			lbs, err := lc.Client.ListLoadBalancers(ctx, s.cfg.ClusterName)
			if err != nil {
				return err
			}
			for _, lb := range lbs {
				if strings.HasPrefix(lb.Spec.Service, Namespace+"/"+ServiceName) {
					return fmt.Errorf("cloud %s still has load balancer %s of %s", lc.Name, lb.Name, lb.Spec.Service)
				}
			}
		}
		return nil
	})
	return "no load balancer left in either cloud", err
}
