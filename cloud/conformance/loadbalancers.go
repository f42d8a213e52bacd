package conformance

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nephele-dev/nephele/cloud"
)

// testNamespace is the namespace of the Services the suite makes up.
const testNamespace = "default"

// lbSpec returns the spec and Service of the test load balancer called suffix: one
// TCP port on a high port number (no privileges needed) chosen per run, the given
// backends, and a Service with a UID derived from the name, so that providers naming
// load balancers after the Service's UID see distinct load balancers too.
func (s *suite) lbSpec(suffix string, backends []cloud.Backend) (*cloud.LoadBalancerSpec, *corev1.Service) {
	return s.lbSpecNamed(s.nameFor(suffix), backends)
}

// lbSpecNamed is lbSpec for the full name.
func (s *suite) lbSpecNamed(name string, backends []cloud.Backend) (*cloud.LoadBalancerSpec, *corev1.Service) {
	port := int32(20000 + s.rand(1, 10000))
	nodePort := int32(30000 + s.rand(2, 2768))
	// The target port as the apiserver defaults it: the port itself.
	targetPort := intstr.FromInt32(port)
	spec := &cloud.LoadBalancerSpec{
		Name:                  name,
		ClusterName:           s.cfg.ClusterName,
		Service:               types.NamespacedName{Namespace: testNamespace, Name: name},
		Ports:                 []cloud.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, NodePort: nodePort, TargetPort: targetPort}},
		Backends:              backends,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	u := h.Sum64() ^ s.seed
	uid := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(u>>32), uint16(u>>16), uint16(u)&0xfff, uint16(s.seed)&0xfff, s.seed>>16)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID(uid)},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, NodePort: nodePort, TargetPort: targetPort}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
		},
	}
	return spec, svc
}

// noteLB remembers that a load balancer may exist, for the cleanup.
func (s *suite) noteLB(name string) {
	if !slices.Contains(s.lbNames, name) {
		s.lbNames = append(s.lbNames, name)
	}
}

func (c *checker) ensure(spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	c.s.noteLB(spec.Name)
	st, err := call(c, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		return c.s.lbs.EnsureLoadBalancer(ctx, spec, svc)
	})
	if err == nil && st == nil {
		return nil, fmt.Errorf("EnsureLoadBalancer returned neither a status nor an error")
	}
	return st, err
}

func (c *checker) getLB(spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	st, err := call(c, func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		return c.s.lbs.GetLoadBalancer(ctx, spec, svc)
	})
	if err == nil && st == nil {
		return nil, fmt.Errorf("GetLoadBalancer returned neither a status nor an error")
	}
	return st, err
}

func (c *checker) updateLB(spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	return do(c, func(ctx context.Context) error { return c.s.lbs.UpdateLoadBalancerBackends(ctx, spec, svc) })
}

func (c *checker) deleteLB(spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	return do(c, func(ctx context.Context) error { return c.s.lbs.EnsureLoadBalancerDeleted(ctx, spec, svc) })
}

// mustEnsure ensures the load balancer and records a problem when that fails.
func (c *checker) mustEnsure(spec *cloud.LoadBalancerSpec, svc *corev1.Service) *corev1.LoadBalancerStatus {
	st, err := c.ensure(spec, svc)
	if err != nil {
		c.errorf("EnsureLoadBalancer %s: %s", spec.Name, describe(err))
		return nil
	}
	return st
}

// ingressAddresses returns the IPs and host names of a status, sorted.
func ingressAddresses(st *corev1.LoadBalancerStatus) []string {
	var out []string
	for _, in := range st.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		}
		if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	slices.Sort(out)
	return out
}

func checkLBGetMissing(c *checker) {
	spec, svc := c.s.lbSpec("lb-never", nil)
	_, err := c.getLB(spec, svc)
	if !cloud.IsNotFound(err) {
		c.errorf("GetLoadBalancer %s, never ensured: %s; want NotFound", spec.Name, describe(err))
	}
}

func checkLBDeleteMissing(c *checker) {
	spec, svc := c.s.lbSpec("lb-never", nil)
	if err := c.deleteLB(spec, svc); err != nil {
		c.errorf("EnsureLoadBalancerDeleted %s, never ensured: %s; want success", spec.Name, describe(err))
	}
}

func checkLBEnsureStatus(c *checker) {
	spec, svc := c.s.lbSpec("lb", c.s.backends(c.ctx))
	st := c.mustEnsure(spec, svc)
	if st == nil {
		return
	}
	if len(st.Ingress) == 0 {
		c.errorf("EnsureLoadBalancer %s returned a status without ingress", spec.Name)
	}
	for i, in := range st.Ingress {
		switch {
		case in.IP == "" && in.Hostname == "":
			c.errorf("ingress %d has neither an IP nor a host name", i)
		case in.IP != "":
			if _, err := netip.ParseAddr(in.IP); err != nil {
				c.errorf("ingress %d: IP %q is not an IP address", i, in.IP)
			}
		}
	}
}

func checkLBEnsureIdempotent(c *checker) {
	spec, svc := c.s.lbSpec("lb", c.s.backends(c.ctx))
	first := c.mustEnsure(spec, svc)
	if first == nil {
		return
	}
	second := c.mustEnsure(spec, svc)
	if second == nil {
		return
	}
	if !reflect.DeepEqual(first, second) {
		c.errorf("ensuring %s twice returned %+v, then %+v", spec.Name, *first, *second)
	}
}

func checkLBGetAfterEnsure(c *checker) {
	spec, svc := c.s.lbSpec("lb", c.s.backends(c.ctx))
	st := c.mustEnsure(spec, svc)
	if st == nil {
		return
	}
	got, err := c.getLB(spec, svc)
	if err != nil {
		c.errorf("GetLoadBalancer %s after ensuring it: %s", spec.Name, describe(err))
		return
	}
	if w, g := ingressAddresses(st), ingressAddresses(got); !slices.Equal(w, g) {
		c.errorf("GetLoadBalancer %s returned addresses %v; EnsureLoadBalancer returned %v", spec.Name, g, w)
	}
}

func checkLBUpdateBackends(c *checker) {
	all := c.s.backends(c.ctx)
	spec, svc := c.s.lbSpec("lb", all)
	st := c.mustEnsure(spec, svc)
	if st == nil {
		return
	}
	sets := [][]cloud.Backend{all[:0], all}
	if len(all) > 1 {
		sets = [][]cloud.Backend{all[:1], all}
	}
	for _, set := range sets {
		names := backendNames(set)
		for try := 1; try <= 2; try++ {
			spec.Backends = set
			if err := c.updateLB(spec, svc); err != nil {
				c.errorf("UpdateLoadBalancerBackends %s to [%s], call %d: %s", spec.Name, names, try, describe(err))
			}
		}
	}
	if c.failed() {
		return
	}
	spec.Backends = all
	again := c.mustEnsure(spec, svc)
	if again == nil {
		return
	}
	if w, g := ingressAddresses(st), ingressAddresses(again); !slices.Equal(w, g) {
		c.errorf("after backend updates, EnsureLoadBalancer %s returned addresses %v, before %v: a backend change must not move the load balancer", spec.Name, g, w)
	}
}

func backendNames(bs []cloud.Backend) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.NodeName
	}
	return strings.Join(names, " ")
}

func checkLBDeleteIdempotent(c *checker) {
	spec, svc := c.s.lbSpec("lb-delete", c.s.backends(c.ctx))
	if c.mustEnsure(spec, svc) == nil {
		return
	}
	for try := 1; try <= 2; try++ {
		if err := c.deleteLB(spec, svc); err != nil {
			c.errorf("EnsureLoadBalancerDeleted %s, call %d: %s", spec.Name, try, describe(err))
		}
	}
}

func checkLBGoneAfterDelete(c *checker) {
	spec, svc := c.s.lbSpec("lb", c.s.backends(c.ctx))
	if c.mustEnsure(spec, svc) == nil {
		return
	}
	if err := c.deleteLB(spec, svc); err != nil {
		c.errorf("EnsureLoadBalancerDeleted %s: %s", spec.Name, describe(err))
		return
	}
	c.poll(fmt.Sprintf("deleted load balancer %s is NotFound", spec.Name), func() (bool, string) {
		st, err := c.getLB(spec, svc)
		switch {
		case cloud.IsNotFound(err):
			return true, ""
		case err != nil:
			return false, describe(err)
		}
		return false, fmt.Sprintf("found with addresses %v", ingressAddresses(st))
	})
}
