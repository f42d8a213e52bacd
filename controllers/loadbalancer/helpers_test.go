package loadbalancer

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// svcOpt changes a Service built by newService.
type svcOpt func(*corev1.Service)

// newService returns a Service of type LoadBalancer with one TCP port.
func newService(ns, name string, opts ...svcOpt) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			UID:       types.UID(fmt.Sprintf("0c6f1a2e-5b7d-4e8f-9a0b-%012x", hashName(ns+"/"+name))),
		},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080,
			}},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func hashName(s string) uint64 { return fnvString(fnvOffset, s) & 0xffffffffffff }

func withType(t corev1.ServiceType) svcOpt {
	return func(s *corev1.Service) { s.Spec.Type = t }
}

func withClass(class string) svcOpt {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
}

func withSourceRanges(r ...string) svcOpt {
	return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

func withAnnotation(k, v string) svcOpt {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func withFinalizer() svcOpt {
	return func(s *corev1.Service) { s.Finalizers = append(s.Finalizers, Finalizer) }
}

func withLocalTraffic(hcPort int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
	}
}

func withPort(name string, proto corev1.Protocol, port, nodePort int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Protocol: proto, Port: port, NodePort: nodePort})
	}
}

// withTargetPort sets the target port of the Service's first port.
func withTargetPort(tp intstr.IntOrString) svcOpt {
	return func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = tp }
}

// withAppProtocol sets the appProtocol of the Service's first port.
func withAppProtocol(proto string) svcOpt {
	return func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = &proto }
}

// nodeOpt changes a Node built by newNode.
type nodeOpt func(*corev1.Node)

// newNode returns an initialized node: provider ID set, no taints, one internal IP.
func newNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: "fake://" + name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
			{Type: corev1.NodeHostName, Address: name},
		}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withTaint(key string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

func withLabel(k, v string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

func withoutProviderID() nodeOpt {
	return func(n *corev1.Node) { n.Spec.ProviderID = "" }
}

func withIP(ip string) nodeOpt {
	return func(n *corev1.Node) { n.Status.Addresses[0].Address = ip }
}

func deleting() nodeOpt {
	return func(n *corev1.Node) {
		now := metav1.Now()
		n.DeletionTimestamp = &now
		n.Finalizers = []string{"example.com/hold"}
	}
}

func deletedAt() *metav1.Time {
	now := metav1.Now()
	return &now
}
