package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcluster"
)

// BenchClaimsEnv sets how many claims BenchmarkVolumeClaims makes: `make bench-volumes`
// sets 100 (issue 22's row); `make test` runs it once with the default, so that the
// benchmark cannot break unseen.
const BenchClaimsEnv = "NEPHELE_BENCH_CLAIMS"

// benchNodes is the row's node count.
const benchNodes = 3

// benchProfile is the benchmark harness's default cloud profile (bench/harness): 50 ms
// on every call and 50 calls/s for the whole account, burst 50.
var benchProfile = struct {
	latency time.Duration
	qps     float64
	burst   int
}{50 * time.Millisecond, 50, 50}

// BenchmarkVolumeClaims is issue 22's row: a StatefulSet of N replicas (pods managed in
// parallel) with a claim each of the default StorageClass on 3 real nodes, the cloud
// under the benchmark harness's profile. It reports the time until every pod runs with
// its volume mounted, the cloud calls per volume (volume operations, and all calls the
// cloud answered in that time, the CCM's included), the limit (the shortest time the
// quota allows for the calls the work needs at least: a create and an attach per
// volume, as bench/results.Params.Limit computes it) and the time until deleting the
// claims has deleted every volume in the cloud.
func BenchmarkVolumeClaims(b *testing.B) {
	hoststest.RequireRoot(b)
	claims := 6
	if v := os.Getenv(BenchClaimsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a number of claims, at least 1", BenchClaimsEnv, v)
		}
		claims = n
	}
	// Pods spread over the nodes; half again the even share leaves the scheduler room.
	limit := max(api.DefaultVolumeAttachLimit, (claims+benchNodes-1)/benchNodes*3/2)
	c, _ := clustertest.Start(b, "nphvb", clustertest.BinDir(b), benchNodes, func(cfg *localcluster.Config) {
		cfg.Volumes = true
		cfg.VolumeAttachLimit = limit
	})
	ctx := b.Context()
	err := c.Cloud.SetFaults(ctx, []api.Fault{{Operation: "*",
		Latency:   &api.Latency{Distribution: api.DistributionFixed, Fixed: api.Duration{Duration: benchProfile.latency}},
		RateLimit: &api.RateLimit{QPS: benchProfile.qps, Burst: benchProfile.burst}}})
	if err != nil {
		b.Fatal(err)
	}
	ns := "volume-bench"
	cs := c.Env.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	labels := map[string]string{"app": "volume-bench"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "claims", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(claims)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "pause", Image: images.Pause.Ref(images.DefaultVersion),
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
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

	before, err := c.Cloud.CallCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// A generous bound: the row measures how long this takes, and a machine under load
	// takes longer.
	wait := 5*time.Minute + time.Duration(claims)*6*time.Second
	poll.WithinContext(b, wait, fmt.Sprintf("%d pods running with their volumes", claims), func(ctx context.Context) error {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=volume-bench"})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < claims {
			return fmt.Errorf("%d of %d pods running", running, claims)
		}
		return nil
	})
	toRunning := time.Since(start)
	b.StopTimer()
	after, err := c.Cloud.CallCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	up := after.Since(before)

	perNode := map[string]int{}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=volume-bench"})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
	}

	// Deleting the StatefulSet and its claims deletes every volume in the cloud.
	start = time.Now()
	if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := cs.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	// Watched through the API server (a PersistentVolume goes once the provisioner has
	// deleted its volume), then checked in the cloud once: polling the cloud would spend
	// the quota the driver is measured against.
	poll.WithinContext(b, wait, "every PersistentVolume deleted", func(ctx context.Context) error {
		pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(pvs.Items); n > 0 {
			return fmt.Errorf("%d PersistentVolumes left", n)
		}
		return nil
	})
	toDeleted := time.Since(start)
	if err := c.VolumesLeft(ctx); err != nil {
		b.Fatal(err)
	}
	final, err := c.Cloud.CallCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	down := final.Since(after)

	volumeCalls, allCalls := callsOf(up)
	downVolume, downAll := callsOf(down)
	limitSeconds := float64(max(0, 2*claims-benchProfile.burst))/benchProfile.qps + benchProfile.latency.Seconds()
	b.ReportMetric(toRunning.Seconds(), "s-to-running")
	b.ReportMetric(float64(volumeCalls)/float64(claims), "volume-calls/volume")
	b.ReportMetric(float64(allCalls)/float64(claims), "calls/volume")
	b.ReportMetric(limitSeconds, "s-limit")
	b.ReportMetric(toDeleted.Seconds(), "s-to-deleted")
	b.Logf("%d claims on %d nodes (pods per node %v, attach limit %d): every pod running in %.1f s (limit %.2f s: %.1fx); "+
		"%d volume calls (%.2f per volume: %s), %d calls in all (%.2f per volume); deleted in %.1f s with %d volume calls (%s; %d in all)",
		claims, benchNodes, perNode, limit, toRunning.Seconds(), limitSeconds, toRunning.Seconds()/limitSeconds,
		volumeCalls, float64(volumeCalls)/float64(claims), opsLine(up), allCalls, float64(allCalls)/float64(claims),
		toDeleted.Seconds(), downVolume, opsLine(down), downAll)
}

// callsOf sums the calls of volume operations and of every operation.
func callsOf(cc client.CallCounts) (volume, all uint64) {
	for op := range cc {
		n := cc.Total(op)
		all += n
		if strings.HasPrefix(op, "volumes.") {
			volume += n
		}
	}
	return volume, all
}

// opsLine lists the volume operations' calls, "volumes.attach 114 (14 answered 409),
// ...", with the calls not answered 2xx by code.
func opsLine(cc client.CallCounts) string {
	var parts []string
	for _, op := range []string{api.OpVolumesCreate, api.OpVolumesAttach, api.OpVolumesGet, api.OpVolumesList, api.OpVolumesDetach, api.OpVolumesDelete, api.OpVolumesExpand} {
		if n := cc.Total(op); n > 0 {
			s := fmt.Sprintf("%s %d", op, n)
			var failed []string
			for _, code := range slices.Sorted(maps.Keys(cc[op])) {
				if code >= 300 {
					failed = append(failed, fmt.Sprintf("%d answered %d", cc[op][code], code))
				}
			}
			if len(failed) > 0 {
				s += " (" + strings.Join(failed, ", ") + ")"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}
