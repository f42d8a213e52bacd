package manager

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

func fatNode() *corev1.Node {
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n1", UID: "u1", ResourceVersion: "7", CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:        map[string]string{"topology.kubernetes.io/zone": "a", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
			Annotations:   map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.1", "node.alpha.kubernetes.io/ttl": "0"},
			Finalizers:    []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "local://i-1", PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"},
			Taints:        []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: corev1.TaintEffectNoSchedule}},
			Unschedulable: true,
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
					LastHeartbeatTime: metav1.Unix(1700000100, 0), LastTransitionTime: metav1.Unix(1700000000, 0)},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", Message: "the route controller created a route",
					LastHeartbeatTime: metav1.Unix(1700000100, 0), LastTransitionTime: metav1.Unix(1700000000, 0)},
			},
			Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Allocatable:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Images:       []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1}},
			NodeInfo:     corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"},
			VolumesInUse: []corev1.UniqueVolumeName{"v"},
		},
	}
}

// TestTrimForCacheKeepsWhatControllersRead lists the fields the controllers and the
// provider contract read; a controller that reads another field must add it here and
// keep it in TrimForCache.
func TestTrimForCacheKeepsWhatControllersRead(t *testing.T) {
	in := fatNode()
	out, err := TrimForCache(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	n := out.(*corev1.Node)
	kept := []struct {
		name      string
		got, want any
	}{
		{"name", n.Name, in.Name},
		{"uid", n.UID, in.UID},
		{"resourceVersion", n.ResourceVersion, in.ResourceVersion},
		{"creationTimestamp", n.CreationTimestamp, in.CreationTimestamp},
		{"deletionTimestamp", n.DeletionTimestamp, in.DeletionTimestamp},
		{"labels", n.Labels, in.Labels},
		{"finalizers", n.Finalizers, in.Finalizers},
		{"provided node IP annotation", n.Annotations, map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.1"}},
		{"spec", n.Spec, in.Spec},
		{"addresses", n.Status.Addresses, in.Status.Addresses},
		{"conditions but their messages and heartbeats", n.Status.Conditions, trimmedConditions(in.Status.Conditions)},
	}
	for _, k := range kept {
		if !reflect.DeepEqual(k.got, k.want) {
			t.Errorf("%s: %v after the trim, want %v", k.name, k.got, k.want)
		}
	}
	dropped := []struct {
		name string
		v    any
	}{
		{"managedFields", n.ManagedFields},
		{"capacity", n.Status.Capacity},
		{"allocatable", n.Status.Allocatable},
		{"images", n.Status.Images},
		{"volumesInUse", n.Status.VolumesInUse},
		{"nodeInfo", n.Status.NodeInfo},
	}
	for _, d := range dropped {
		if !reflect.ValueOf(d.v).IsZero() {
			t.Errorf("%s kept after the trim: %v", d.name, d.v)
		}
	}
}

// trimmedConditions is what the cache keeps of conditions: all but their messages and
// heartbeat times.
func trimmedConditions(in []corev1.NodeCondition) []corev1.NodeCondition {
	out := slices.Clone(in)
	for i := range out {
		out[i].Message, out[i].LastHeartbeatTime = "", metav1.Time{}
	}
	return out
}

func TestTrimForCacheServicesAndOthers(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: "{...}", "service.beta.kubernetes.io/x": "y",
		}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	tests := []struct {
		name  string
		in    any
		check func(t *testing.T, out any)
	}{
		{name: "service keeps spec, status and provider annotations", in: svc.DeepCopy(), check: func(t *testing.T, out any) {
			s := out.(*corev1.Service)
			if s.ManagedFields != nil || s.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
				t.Errorf("managed fields or last-applied kept: %+v", s.ObjectMeta)
			}
			if s.Annotations["service.beta.kubernetes.io/x"] != "y" || !reflect.DeepEqual(s.Spec, svc.Spec) || !reflect.DeepEqual(s.Status, svc.Status) {
				t.Errorf("service trimmed too far: %+v", s)
			}
		}},
		{name: "a deleted node in a tombstone is trimmed", in: cache.DeletedFinalStateUnknown{Key: "n1", Obj: fatNode()}, check: func(t *testing.T, out any) {
			n := out.(cache.DeletedFinalStateUnknown).Obj.(*corev1.Node)
			if n.ManagedFields != nil || n.Spec.ProviderID == "" {
				t.Errorf("tombstone's node: %+v", n)
			}
		}},
		{name: "other objects pass through", in: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{}}}}, check: func(t *testing.T, out any) {
			if len(out.(*corev1.Pod).ManagedFields) != 1 {
				t.Error("a pod was changed")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := TrimForCache(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, out)
		})
	}
}
