package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/waitfor"
)

// Cluster DNS: CoreDNS in kube-system under the names kubeadm, kind and minikube use
// (Deployment coredns, Service kube-dns, label k8s-app=kube-dns), which tools and
// upstream's e2e suite look for.
const (
	// ClusterDomain is the cluster's DNS domain (kubelet clusterDomain).
	ClusterDomain = "cluster.local"
	dnsName       = "coredns"
	dnsService    = "kube-dns"
	dnsReplicas   = 2
	// dnsServiceIndex is the place of the DNS Service's address in the Service range:
	// the 10th, 10.96.0.10 in the default range, as kubeadm and kind choose.
	dnsServiceIndex = 10
)

// dnsLabels select the DNS pods.
var dnsLabels = map[string]string{"k8s-app": dnsService}

// corefile serves the cluster's zone and the reverse zones from the Kubernetes API (PTR
// records of Services and pods, which upstream's DNS tests query) and answers every
// other name NXDOMAIN itself: there is no forward plugin, since nothing may be asked
// outside the machine, and so no loop plugin either. A pod that resolves a name outside
// the cluster gets a quick "no such name" instead of a timeout.
const corefile = `cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    errors
    health :8080 {
        lameduck 5s
    }
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    prometheus :9153
    cache 30
    loadbalance
    reload
}
.:53 {
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`

// ClusterDNSAddress is the address of the cluster DNS Service in serviceCIDR, which
// kubelets give pods as their nameserver: the range's 10th address.
func ClusterDNSAddress(serviceCIDR netip.Prefix) (netip.Addr, error) {
	a := serviceCIDR.Masked().Addr()
	for range dnsServiceIndex {
		a = a.Next()
	}
	if !a.IsValid() || !serviceCIDR.Contains(a) {
		return netip.Addr{}, fmt.Errorf("service range %s has no %dth address for cluster DNS", serviceCIDR, dnsServiceIndex)
	}
	return a, nil
}

// dnsObjects are the DNS add-on's objects, in the order they are created: RBAC first,
// so the pods can list Services and EndpointSlices when they start.
func dnsObjects(addr netip.Addr, image string) (sa *corev1.ServiceAccount, role *rbacv1.ClusterRole, binding *rbacv1.ClusterRoleBinding,
	cm *corev1.ConfigMap, dep *appsv1.Deployment, svc *corev1.Service) {
	ns := metav1.NamespaceSystem
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"k8s-app": dnsService, "app.kubernetes.io/managed-by": "nephele"}}
	}
	sa = &corev1.ServiceAccount{ObjectMeta: meta(dnsName)}
	// CoreDNS's kubernetes plugin: what its README lists, nothing more.
	role = &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns", Labels: meta("").Labels},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding = &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns", Labels: meta("").Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: dnsName, Namespace: ns}},
	}
	cm = &corev1.ConfigMap{ObjectMeta: meta(dnsName), Data: map[string]string{"Corefile": corefile}}
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 5,
		}
	}
	depMeta := meta(dnsName)
	dep = &appsv1.Deployment{
		ObjectMeta: depMeta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](dnsReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: dnsLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dnsLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: dnsName,
					PriorityClassName:  "system-cluster-critical",
					// Its own resolv.conf is the node's, which names this very Service:
					// harmless, since the Corefile forwards nothing.
					DNSPolicy: corev1.DNSDefault,
					// Replicas on different nodes, so one node going away (upstream's
					// cloud-provider test deletes one) leaves DNS up.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: dnsLabels},
								TopologyKey:   corev1.LabelHostname,
							},
						}},
					}},
					Tolerations: []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true),
						// Port 53 without a capability: a namespaced sysctl of the pod's
						// own network namespace, allowed by default (a "safe" sysctl).
						Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  dnsName,
						Image: image,
						Args:  []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("40Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
						},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						LivenessProbe:  probe("/health", 8080),
						ReadinessProbe: probe("/ready", 8181),
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: dnsName},
					}}}},
				},
			},
		},
	}
	svc = &corev1.Service{
		ObjectMeta: meta(dnsService),
		Spec: corev1.ServiceSpec{
			Selector:  dnsLabels,
			ClusterIP: addr.String(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	return sa, role, binding, cm, dep, svc
}

// deployDNS creates the DNS add-on and waits until its Deployment is available: the e2e
// suite, like an operator's first kubectl, expects every kube-system pod Ready.
func (c *Cluster) deployDNS(ctx context.Context) (string, error) {
	addr, err := ClusterDNSAddress(c.cfg.ServiceCIDR)
	if err != nil {
		return "", err
	}
	// By the digest Start pushed, as the cluster runs its other images.
	image, err := c.PinnedImage(images.CoreDNS.Program)
	if err != nil {
		return "", err
	}
	if err := createDNS(ctx, c.Env.Client, addr, image); err != nil {
		return "", err
	}
	if c.migratingRoutes() {
		// CoreDNS answers once it has read Services from the API server, and the API
		// server's answers reach a pod only through its node's route, which the
		// controller manager holding the migration lease makes, maybe not nephele's.
		return fmt.Sprintf("Service %s/%s at %s, ready once the pods' routes exist (the CCM runs with leader migration)",
			metav1.NamespaceSystem, dnsService, addr), nil
	}
	var ready int32
	err = waitfor.Condition(ctx, startTimeout(ctx), func(ctx context.Context) error {
		dep, err := c.Env.Client.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, dnsName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready = dep.Status.ReadyReplicas
		if ready < dnsReplicas || dep.Status.ObservedGeneration < dep.Generation {
			return fmt.Errorf("%d of %d CoreDNS replicas ready", ready, dnsReplicas)
		}
		return nil
	})
	if err != nil {
		return "", errors.Join(err, c.dnsDiagnostics(context.WithoutCancel(ctx)))
	}
	return fmt.Sprintf("Service %s/%s at %s, %d replicas ready", metav1.NamespaceSystem, dnsService, addr, ready), nil
}

// createDNS creates each object of the add-on; one that exists is left as it is.
func createDNS(ctx context.Context, cs kubernetes.Interface, addr netip.Addr, image string) error {
	sa, role, binding, cm, dep, svc := dnsObjects(addr, image)
	ns := metav1.NamespaceSystem
	create := []struct {
		kind string
		fn   func() error
	}{
		{"ServiceAccount", func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRole", func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRoleBinding", func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		}},
		{"ConfigMap", func() error { _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); return err }},
		{"Service", func() error { _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); return err }},
		{"Deployment", func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
			return err
		}},
	}
	for _, o := range create {
		if err := o.fn(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster DNS: create %s: %w", o.kind, err)
		}
	}
	return nil
}

// dnsDiagnostics describes the DNS pods, for a Deployment that did not become available.
func (c *Cluster) dnsDiagnostics(ctx context.Context) error {
	pods, err := c.Env.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + dnsService})
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\npod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				fmt.Fprintf(&b, "; %s terminated: %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			default:
				fmt.Fprintf(&b, "; %s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			}
		}
	}
	if b.Len() == 0 {
		return errors.New("no CoreDNS pod exists")
	}
	return errors.New("CoreDNS pods:" + b.String())
}
