package handover

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/controllers/loadbalancer"
)

// apiserverIdentityLabel marks kube-apiserver's identity leases, one per apiserver,
// which say nothing about controllers.
const apiserverIdentityLabel = "apiserver.kubernetes.io/identity"

// Survey reads the cluster: every Node, the Leases in namespace (kube-system when
// empty), the control plane components among namespace's Deployments, DaemonSets and
// Pods, and every Service of type LoadBalancer. It makes only GET (list) requests.
// Workloads it may not read are listed in Snapshot.Hidden, not failed on: a cluster whose
// control plane is not visible (a managed one, or static pods without mirror pods) is
// planned from its leases. now is the time the snapshot is taken at.
func Survey(ctx context.Context, client kubernetes.Interface, namespace string, now time.Time) (*Snapshot, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	s := &Snapshot{Time: now, Namespace: namespace}

	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	for i := range nodes.Items {
		s.Nodes = append(s.Nodes, nodeOf(&nodes.Items[i]))
	}

	notIdentity, err := labels.Parse("!" + apiserverIdentityLabel)
	if err != nil {
		return nil, err
	}
	leases, err := client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: notIdentity.String()})
	if err != nil {
		return nil, fmt.Errorf("listing Leases in %s: %w", namespace, err)
	}
	for _, l := range leases.Items {
		lease := Lease{Namespace: l.Namespace, Name: l.Name}
		if h := l.Spec.HolderIdentity; h != nil {
			lease.Holder = *h
		}
		if l.Spec.RenewTime != nil {
			lease.RenewTime = l.Spec.RenewTime.Time
		}
		if d := l.Spec.LeaseDurationSeconds; d != nil {
			lease.Duration = time.Duration(*d) * time.Second
		}
		if t := l.Spec.LeaseTransitions; t != nil {
			lease.Transitions = *t
		}
		s.Leases = append(s.Leases, lease)
	}

	services, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	for i := range services.Items {
		if svc := &services.Items[i]; svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			s.Services = append(s.Services, serviceOf(svc))
		}
	}

	if err := s.readWorkloads(ctx, client); err != nil {
		return nil, err
	}
	slices.SortFunc(s.Nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Leases, func(a, b Lease) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Services, func(a, b Service) int { return strings.Compare(a.String(), b.String()) })
	slices.SortFunc(s.Components, func(a, b Component) int {
		return strings.Compare(string(a.Kind)+" "+a.Workload+" "+a.Container, string(b.Kind)+" "+b.Workload+" "+b.Container)
	})
	return s, nil
}

// readWorkloads finds the components among the namespace's Deployments, DaemonSets and
// the Pods no ReplicaSet or DaemonSet owns (static and bare pods).
func (s *Snapshot) readWorkloads(ctx context.Context, client kubernetes.Interface) error {
	hidden := func(what string, err error) (bool, error) {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			s.Hidden = append(s.Hidden, fmt.Sprintf("%s in %s (%s)", what, s.Namespace, apierrors.ReasonForError(err)))
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("listing %s in %s: %w", what, s.Namespace, err)
		}
		return false, nil
	}

	deployments, err := client.AppsV1().Deployments(s.Namespace).List(ctx, metav1.ListOptions{})
	if skip, err := hidden("Deployments", err); err != nil {
		return err
	} else if !skip {
		for _, d := range deployments.Items {
			s.addPodSpec("Deployment "+s.Namespace+"/"+d.Name, d.Spec.Template.Labels, &d.Spec.Template.Spec)
		}
	}
	daemonSets, err := client.AppsV1().DaemonSets(s.Namespace).List(ctx, metav1.ListOptions{})
	if skip, err := hidden("DaemonSets", err); err != nil {
		return err
	} else if !skip {
		for _, d := range daemonSets.Items {
			s.addPodSpec("DaemonSet "+s.Namespace+"/"+d.Name, d.Spec.Template.Labels, &d.Spec.Template.Spec)
		}
	}
	pods, err := client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{})
	if skip, err := hidden("Pods", err); err != nil {
		return err
	} else if !skip {
		for _, p := range pods.Items {
			kind := "Pod"
			switch ownerKind(p.OwnerReferences) {
			case "ReplicaSet", "DaemonSet":
				continue // seen through its Deployment or DaemonSet
			case "Node":
				kind = "static Pod"
			}
			s.addPodSpec(kind+" "+s.Namespace+"/"+p.Name, p.Labels, &p.Spec)
		}
	}
	return nil
}

func ownerKind(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.Kind
		}
	}
	if len(refs) > 0 {
		return refs[0].Kind
	}
	return ""
}

// addPodSpec adds the components among a pod template's containers.
func (s *Snapshot) addPodSpec(workload string, podLabels map[string]string, spec *corev1.PodSpec) {
	for _, c := range spec.Containers {
		kind, ok := componentKind(podLabels, c)
		if !ok {
			continue
		}
		s.Components = append(s.Components, Component{
			Kind:      kind,
			Nephele:   kind == CloudControllerManager && mentionsNephele(podLabels, c),
			Workload:  workload,
			Container: c.Name,
			Image:     c.Image,
			Version:   imageVersion(c.Image),
			Args:      parseArgs(c.Command, c.Args),
		})
	}
}

// componentKind tells a control plane component by its binary (the command, or the
// image when the command is the image's own) or its pod's labels, as kubeadm and the
// cloud providers' manifests label them.
func componentKind(podLabels map[string]string, c corev1.Container) (ComponentKind, bool) {
	names := []string{imageName(c.Image), c.Name}
	if len(c.Command) > 0 {
		names = append(names, path.Base(c.Command[0]))
		if isShell(c.Command[0]) && len(c.Command) > 2 {
			names = append(names, c.Command[2])
		}
	}
	for _, k := range []string{"component", "k8s-app", "app", "app.kubernetes.io/name", "app.kubernetes.io/component"} {
		if v, ok := podLabels[k]; ok {
			names = append(names, v)
		}
	}
	for _, kind := range []ComponentKind{KubeAPIServer, KubeControllerManager, CloudControllerManager} {
		for _, n := range names {
			if strings.Contains(n, string(kind)) {
				return kind, true
			}
		}
	}
	return "", false
}

// mentionsNephele tells nephele's cloud-controller-manager from others: its image,
// command or pod labels say so.
func mentionsNephele(podLabels map[string]string, c corev1.Container) bool {
	texts := append([]string{c.Image}, c.Command...)
	for k, v := range podLabels {
		texts = append(texts, k, v)
	}
	for _, t := range texts {
		if strings.Contains(strings.ToLower(t), "nephele") {
			return true
		}
	}
	return false
}

// imageName returns an image reference's last path element without tag or digest.
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	name := path.Base(image)
	name, _, _ = strings.Cut(name, ":")
	return name
}

// imageVersion returns an image's tag when it reads as a version.
func imageVersion(image string) string {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	tag := image[i+1:]
	if _, err := version.ParseGeneric(tag); err != nil {
		return ""
	}
	return tag
}

func nodeOf(n *corev1.Node) Node {
	out := Node{Name: n.Name, ProviderID: n.Spec.ProviderID, KubeletVersion: n.Status.NodeInfo.KubeletVersion}
	for _, t := range n.Spec.Taints {
		if t.Key != cloudproviderapi.TaintExternalCloudProvider {
			continue
		}
		out.Uninitialized = true
		out.TaintedSince = n.CreationTimestamp.Time
		if t.TimeAdded != nil {
			out.TaintedSince = t.TimeAdded.Time
		}
	}
	return out
}

func serviceOf(svc *corev1.Service) Service {
	out := Service{Namespace: svc.Namespace, Name: svc.Name, Finalizer: slices.Contains(svc.Finalizers, loadbalancer.Finalizer)}
	if svc.Spec.LoadBalancerClass != nil {
		out.Class = *svc.Spec.LoadBalancerClass
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out.Ingress = append(out.Ingress, in.IP)
		} else if in.Hostname != "" {
			out.Ingress = append(out.Ingress, in.Hostname)
		}
	}
	if svc.DeletionTimestamp != nil {
		out.DeletingSince = svc.DeletionTimestamp.Time
	}
	return out
}
