package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcluster"
)

// TestCSIInCluster deploys the CSI driver as `nephele up` does (the rendered manifests
// applied with kubectl) on 2 real nodes of one zone with kube-apiserver's audit log on,
// and walks a volume through its life: provisioned for a pod, expanded while no pod uses
// it, grown at staging on the other node, deleted with its claim. Then every permission the rendering
// grants the driver's identities must have been used, or be in docs/volumes.md's table
// of permissions this test does not see used, and no request of theirs refused.
func TestCSIInCluster(t *testing.T) {
	hoststest.RequireRoot(t)
	c, auditLog := startAudited(t, "nphcs", clustertest.BinDir(t), func(cfg *localcluster.Config) { cfg.Volumes = true })
	o, err := c.CSIManifests()
	if err != nil {
		t.Fatal(err)
	}
	v := &volumeLife{t: t, c: c, ns: "csi-e2e"}
	if _, err := c.Env.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("a claim of the default StorageClass is provisioned and mounted", v.provision)
	t.Run("the claim, expanded while no pod uses it, moves to the other node grown and with its data", v.expandAndMove)
	t.Run("deleting the pod and the claim deletes the volume", v.remove)
	if t.Failed() {
		return
	}
	// The audit log is whole once kube-apiserver has stopped.
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("stop the cluster: %v", err)
	}
	t.Run("every granted permission is used or documented", func(t *testing.T) {
		granted := map[grant]string{}
		users := map[string]string{}
		for _, id := range []struct {
			name  string
			rules []rbacv1.PolicyRule
		}{
			{render.CSIControllerName, append(append([]rbacv1.PolicyRule(nil), render.CSIControllerRules...), render.CSILeaseRules...)},
			{render.CSINodeName, render.CSINodeRules},
		} {
			name := o.Namespace + "/" + id.name
			users["system:serviceaccount:"+o.Namespace+":"+id.name] = name
			for _, r := range id.rules {
				for _, res := range r.Resources {
					for _, verb := range r.Verbs {
						granted[grant{name, r.APIGroups[0], res, verb}] = "the CSI sidecars' RBAC"
					}
				}
			}
		}
		all := func(auditEvent) bool { return true }
		judgePermissions(t, auditLog, "the CSI driver", granted, users, all, unusedInE2E(t, "volumes.md", "csi-unused-in-e2e"), time.Time{})
	})
}

// volumeLife walks one volume through its life in namespace ns.
type volumeLife struct {
	t     *testing.T
	c     *localcluster.Cluster
	ns    string
	first string // the node of the first pod
}

const (
	csiClaim = "data"
	csiFile  = "/data/kept"
)

func (v *volumeLife) pod(name string, avoid string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v.ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "demo", Image: localcluster.DemoImage,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: csiClaim}}}},
			SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
	if avoid != "" {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{avoid}}},
			}}},
		}}
	}
	return p
}

// running creates the pod and waits until it runs, returning its node.
func (v *volumeLife) running(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	pods := v.c.Env.Client.CoreV1().Pods(v.ns)
	if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var node string
	poll.EventuallyContext(t, "pod "+p.Name+" running", func(ctx context.Context) error {
		got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is %s on %q: %+v", p.Name, got.Status.Phase, got.Spec.NodeName, got.Status.Conditions)
		}
		node = got.Spec.NodeName
		return nil
	})
	return node
}

func (v *volumeLife) exec(t *testing.T, pod string, args ...string) string {
	t.Helper()
	out, err := v.c.RunKubectl(t.Context(), nil, append([]string{"exec", "-n", v.ns, pod, "--", "/demo-http"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (v *volumeLife) provision(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: csiClaim, Namespace: v.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("300Mi")}},
		},
	}
	if _, err := v.c.Env.Client.CoreV1().PersistentVolumeClaims(v.ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v.first = v.running(t, v.pod("first", ""))
	v.exec(t, "first", "write", csiFile, "written on "+v.first)
}

// expandAndMove deletes the first pod, expands the claim (offline: online growth of a
// mounted ext4 needs CAP_SYS_RESOURCE, which a machine may lack, docs/volumes.md), then
// runs a pod on the other node, whose staging grows the file system.
func (v *volumeLife) expandAndMove(t *testing.T) {
	pods := v.c.Env.Client.CoreV1().Pods(v.ns)
	if err := pods.Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.EventuallyContext(t, "pod first gone", func(ctx context.Context) error {
		_, err := pods.Get(ctx, "first", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod first still there (%v)", err)
	})
	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"400Mi"}}}}`)
	claims := v.c.Env.Client.CoreV1().PersistentVolumeClaims(v.ns)
	if _, err := claims.Patch(t.Context(), csiClaim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want := resource.MustParse("400Mi")
	poll.EventuallyContext(t, "the volume expanded in the cloud", func(ctx context.Context) error {
		pvc, err := claims.Get(ctx, csiClaim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pv, err := v.c.Env.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(want) < 0 {
			return fmt.Errorf("PersistentVolume %s: capacity %s; claim conditions %+v", pv.Name, got.String(), pvc.Status.Conditions)
		}
		return nil
	})
	second := v.running(t, v.pod("second", v.first))
	if got, want := v.exec(t, "second", "cat", csiFile), "written on "+v.first; got != want {
		t.Errorf("%s on %s holds %q, want %q", csiFile, second, got, want)
	}
	poll.EventuallyContext(t, "the claim's capacity 400Mi", func(ctx context.Context) error {
		pvc, err := claims.Get(ctx, csiClaim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.Cmp(want) < 0 {
			return fmt.Errorf("capacity %s, conditions %+v", got.String(), pvc.Status.Conditions)
		}
		return nil
	})
}

func (v *volumeLife) remove(t *testing.T) {
	ctx := t.Context()
	cs := v.c.Env.Client
	if err := cs.CoreV1().Pods(v.ns).Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.EventuallyContext(t, "pod second gone", func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods(v.ns).Get(ctx, "second", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod second still there (%v)", err)
	})
	if err := cs.CoreV1().PersistentVolumeClaims(v.ns).Delete(ctx, csiClaim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.EventuallyContext(t, "no volume left in the cloud", v.c.VolumesLeft)
}
