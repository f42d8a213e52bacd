package smoke

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// The objects of the volume checks.
const (
	volumeClaim = "nephele-smoke-data"
	volumeSet   = "nephele-smoke-set"
	volumeDir   = "/data"
	volumeFile  = volumeDir + "/smoke"
	// volumeLabel marks the volume checks' pods.
	volumeLabel = "nephele-smoke-volume"
	// nonRootGID is the group of the demo image's user (images.NonRootUser).
	nonRootGID = 65532
)

// volumeChecks are the checks of a cluster with the CSI driver (Config.Volumes): a
// claim of the default StorageClass bound, mounted and written; the pod moved to
// another node with its data; a StatefulSet of two replicas with a volume each; and
// nothing left in the cloud once the claims are deleted.
func (s *smoke) volumeChecks() []check {
	return []check{
		{"a PVC of the default StorageClass is bound, mounted in a pod and written", s.volumeWritten},
		{"the pod deleted and started on another node of the zone reads its data there", s.volumeMoved},
		{"a StatefulSet of two replicas gets a volume each, each mounted and written", s.statefulSet},
		{"deleting the claims deletes their volumes in the cloud", s.volumesDeleted},
	}
}

// volumePod is a demo pod mounting claim at volumeDir, on a node of zone, kept off the
// nodes in avoid.
func volumePod(name, claim, zone string, avoid ...string) *corev1.Pod {
	c := demoContainer()
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: volumeDir}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": volumeLabel}},
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{c},
			SecurityContext: volumeSecurity(),
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	}
	match := []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}
	if len(avoid) > 0 {
		match = append(match, corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: avoid})
	}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: match}}},
	}}
	return pod
}

// sharedZone is the first zone (by name) holding two schedulable nodes or more: where a
// pod and its volume can move between nodes. localcluster places nodes two per zone in a
// cluster with volumes.
func (s *smoke) sharedZone(ctx context.Context) (string, []string, error) {
	nodes, err := s.c.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", nil, err
	}
	byZone := map[string][]string{}
	for _, n := range nodes.Items {
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" && !n.Spec.Unschedulable {
			byZone[z] = append(byZone[z], n.Name)
		}
	}
	for _, z := range slices.Sorted(maps.Keys(byZone)) {
		if len(byZone[z]) >= 2 {
			slices.Sort(byZone[z])
			return z, byZone[z], nil
		}
	}
	return "", nil, fmt.Errorf("no zone holds two nodes (%v): a volume stays in its zone, so moving a pod with its volume needs two nodes in one", byZone)
}

// volumeSecurity gives the pod's volumes to the demo image's nonroot user's group: kubelet
// makes a new file system's root writable for it (the CSIDriver's fsGroupPolicy).
func volumeSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{FSGroup: ptr.To[int64](nonRootGID)}
}

// readyPod waits until the pod is Ready and returns it.
func (s *smoke) readyPod(ctx context.Context, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := s.eventually(ctx, func(ctx context.Context) error {
		p, err := s.c.Env.Client.CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(p) {
			return fmt.Errorf("pod %s is %s on %q%s", name, p.Status.Phase, p.Spec.NodeName, podWaiting(p))
		}
		pod = p
		return nil
	})
	return pod, err
}

// podWaiting says why a pod's containers wait, if they do.
func podWaiting(p *corev1.Pod) string {
	var b strings.Builder
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			fmt.Fprintf(&b, "; %s: %s", c.Type, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			fmt.Fprintf(&b, "; %s %s %s", cs.Name, w.Reason, w.Message)
		}
	}
	return b.String()
}

// claimVolume returns the cloud volume behind a bound claim: the PersistentVolume's
// volume handle is the cloud's volume ID.
func (s *smoke) claimVolume(ctx context.Context, claim string) (*corev1.PersistentVolume, *api.Volume, error) {
	pvc, err := s.c.Env.Client.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		return nil, nil, fmt.Errorf("claim %s is %s", claim, pvc.Status.Phase)
	}
	pv, err := s.c.Env.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if pv.Spec.CSI == nil {
		return nil, nil, fmt.Errorf("PersistentVolume %s is not a CSI volume", pv.Name)
	}
	vol, err := s.c.Cloud.GetVolume(ctx, pv.Spec.CSI.VolumeHandle)
	if err != nil {
		return nil, nil, fmt.Errorf("the cloud's volume %s of PersistentVolume %s: %w", pv.Spec.CSI.VolumeHandle, pv.Name, err)
	}
	return pv, vol, nil
}

// writeVolume writes text to volumeFile in pod and reads it back.
func (s *smoke) writeVolume(ctx context.Context, pod, text string) error {
	if _, err := s.kubectl(ctx, "exec", pod, "--", "/demo-http", "write", volumeFile, text); err != nil {
		return err
	}
	return s.readVolume(ctx, pod, text)
}

// readVolume checks that volumeFile in pod holds text.
func (s *smoke) readVolume(ctx context.Context, pod, text string) error {
	got, err := s.kubectl(ctx, "exec", pod, "--", "/demo-http", "cat", volumeFile)
	if err != nil {
		return err
	}
	if got != text {
		return fmt.Errorf("%s in pod %s holds %q, want %q", volumeFile, pod, got, text)
	}
	return nil
}

// volumeText is what the checks write on a node.
func volumeText(node string) string { return "written on " + node }

func (s *smoke) volumeWritten(ctx context.Context) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: volumeClaim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := s.c.Env.Client.CoreV1().PersistentVolumeClaims(Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create PersistentVolumeClaim %s: %w", volumeClaim, err)
	}
	zone, nodes, err := s.sharedZone(ctx)
	if err != nil {
		return "", err
	}
	if _, err := s.c.Env.Client.CoreV1().Pods(Namespace).Create(ctx, volumePod(volumeClaim+"-1", volumeClaim, zone), metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create pod: %w", err)
	}
	pod, err := s.readyPod(ctx, volumeClaim+"-1")
	if err != nil {
		return "", err
	}
	if err := s.writeVolume(ctx, pod.Name, volumeText(pod.Spec.NodeName)); err != nil {
		return "", err
	}
	pv, vol, err := s.claimVolume(ctx, volumeClaim)
	if err != nil {
		return "", err
	}
	if vol.State != api.VolumeAttached || vol.AttachedTo == "" {
		return "", fmt.Errorf("the cloud's volume %s is %s, attached to %q, while pod %s on %s mounts it", vol.ID, vol.State, vol.AttachedTo, pod.Name, pod.Spec.NodeName)
	}
	return fmt.Sprintf("claim bound to %s (cloud volume %s, %d MiB in %s, attached to %s); pod %s on %s (zone %s: %s) wrote %s",
		pv.Name, vol.ID, vol.SizeBytes>>20, vol.Zone, vol.AttachedTo, pod.Name, pod.Spec.NodeName, zone, strings.Join(nodes, ", "), volumeFile), nil
}

func (s *smoke) volumeMoved(ctx context.Context) (string, error) {
	pods := s.c.Env.Client.CoreV1().Pods(Namespace)
	first, err := pods.Get(ctx, volumeClaim+"-1", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	from := first.Spec.NodeName
	zone, _, err := s.sharedZone(ctx)
	if err != nil {
		return "", err
	}
	if err := pods.Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete pod %s: %w", first.Name, err)
	}
	// The volume detaches from the first node once the pod is gone, and attaches to the
	// second: the attacher waits for kubelet to unmount it.
	if _, err := pods.Create(ctx, volumePod(volumeClaim+"-2", volumeClaim, zone, from), metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create pod: %w", err)
	}
	pod, err := s.readyPod(ctx, volumeClaim+"-2")
	if err != nil {
		return "", err
	}
	if pod.Spec.NodeName == from {
		return "", fmt.Errorf("pod %s runs on %s again", pod.Name, from)
	}
	if err := s.readVolume(ctx, pod.Name, volumeText(from)); err != nil {
		return "", err
	}
	_, vol, err := s.claimVolume(ctx, volumeClaim)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("pod %s on %s reads what %s wrote (cloud volume %s now attached to %s)", pod.Name, pod.Spec.NodeName, from, vol.ID, vol.AttachedTo), nil
}

func (s *smoke) statefulSet(ctx context.Context) (string, error) {
	labels := map[string]string{"app": volumeSet}
	c := demoContainer()
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: volumeDir}}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: volumeSet},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](2),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{c}, SecurityContext: volumeSecurity(),
					TerminationGracePeriodSeconds: ptr.To[int64](5)},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}},
		},
	}
	if _, err := s.c.Env.Client.AppsV1().StatefulSets(Namespace).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create StatefulSet %s: %w", volumeSet, err)
	}
	var seen []string
	for i := range 2 {
		name := fmt.Sprintf("%s-%d", volumeSet, i)
		pod, err := s.readyPod(ctx, name)
		if err != nil {
			return "", err
		}
		text := fmt.Sprintf("replica %d on %s", i, pod.Spec.NodeName)
		if err := s.writeVolume(ctx, name, text); err != nil {
			return "", err
		}
		_, vol, err := s.claimVolume(ctx, "data-"+name)
		if err != nil {
			return "", err
		}
		seen = append(seen, fmt.Sprintf("%s on %s with %s", name, pod.Spec.NodeName, vol.ID))
	}
	return strings.Join(seen, ", "), nil
}

func (s *smoke) volumesDeleted(ctx context.Context) (string, error) {
	cs := s.c.Env.Client
	if err := cs.AppsV1().StatefulSets(Namespace).Delete(ctx, volumeSet, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete StatefulSet %s: %w", volumeSet, err)
	}
	if err := cs.CoreV1().Pods(Namespace).Delete(ctx, volumeClaim+"-2", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("delete pod: %w", err)
	}
	claims := []string{volumeClaim, "data-" + volumeSet + "-0", "data-" + volumeSet + "-1"}
	for _, claim := range claims {
		if err := cs.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
			return "", fmt.Errorf("delete PersistentVolumeClaim %s: %w", claim, err)
		}
	}
	err := s.eventually(ctx, s.c.VolumesLeft)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d claims deleted; no volume left in the cloud, no PersistentVolume left", len(claims)), nil
}
