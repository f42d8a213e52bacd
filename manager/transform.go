package manager

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// TrimForCache is the shared informers' transform: it drops, before an object is
// cached, the fields no nephele controller or provider call reads, so that the cache of
// a large cluster holds what the controllers use and not the rest. It is applied to
// every Node and Service the informers receive, on every event.
//
// Kept: all of ObjectMeta but managedFields (and, on Nodes, annotations other than the
// provided node IP); a Node's spec, addresses and conditions; a Service's spec and
// status whole. Dropped from a Node's status: images, volumes, capacity, allocatable,
// node info, daemon endpoints, config, runtime handlers and features. From a Service,
// only managedFields and kubectl's last-applied-configuration annotation, because
// providers read a Service's annotations for their load balancer settings.
//
// No controller writes an object back whole (every write is a patch of the fields it
// owns, or a status subresource patch), so a trimmed copy never erases what it lacks.
// A field a controller comes to read must be kept here: TestTrimForCacheKeepsWhatControllersRead
// lists them.
func TrimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		trimNode(o)
	case *corev1.Service:
		o.ManagedFields = nil
		delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
	case cache.DeletedFinalStateUnknown:
		inner, err := TrimForCache(o.Obj)
		if err != nil {
			return nil, err
		}
		o.Obj = inner
		return o, nil
	}
	return obj, nil
}

func trimNode(n *corev1.Node) {
	n.ManagedFields = nil
	if ip, ok := n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; ok {
		n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: ip}
	} else {
		n.Annotations = nil
	}
	s := &n.Status
	s.Capacity, s.Allocatable = nil, nil
	s.Images = nil
	s.VolumesInUse, s.VolumesAttached = nil, nil
	s.NodeInfo = corev1.NodeSystemInfo{}
	s.DaemonEndpoints = corev1.NodeDaemonEndpoints{}
	s.Config = nil
	s.RuntimeHandlers = nil
	s.Features = nil
	s.Phase = ""
	// Conditions stay (the lifecycle controller reads Ready, the route controller
	// NetworkUnavailable's status and reason, hosted providers may read more), but not
	// their human messages or the heartbeat time a kubelet moves every few seconds.
	for i := range s.Conditions {
		s.Conditions[i].Message = ""
		s.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
}
