package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcluster"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/install"
	"github.com/nephele-dev/nephele/operator/profiles"
	"github.com/nephele-dev/nephele/operator/scheme"
)

// realTimeout bounds each wait on real nodes: pulls, pod starts and rollouts on a
// loaded two-core machine.
const realTimeout = 4 * time.Minute

func TestOperatorOnRealNodes(t *testing.T) {
	hoststest.RequireRoot(t)
	bin := clustertest.BinDir(t)
	// The nodes come up Ready but uninitialized: the operator's CCM must initialize them.
	c, _ := clustertest.Start(t, "nphop", bin, 2, func(cfg *localcluster.Config) { cfg.DeferCCM = true })
	cfg := c.Config()
	ctx := t.Context()
	cl, err := client.New(c.Env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}

	o := c.CCMManifests()
	// Everything up to the Nodes' initialization runs with no CNI configured: the static
	// pod, the operator and the CCM's Deployment are on the host network and tolerate
	// NotReady Nodes, as they must, since a CNI waits for Nodes the CCM initializes.
	saved := removeCNI(t, c, cfg, cl)
	// Bootstrap: the CCM as a static pod on node-1's kubelet, before any operator.
	staticHolder := bootstrapStaticPod(t, c, cfg, o)

	// Install the operator as users do: its manifests, applied with kubectl.
	objs, err := install.Render(install.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	data, err := install.YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(t.TempDir(), "operator.yaml")
	if err := os.WriteFile(manifests, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.RunKubectl(ctx, nil, "apply", "--server-side", "-f", manifests); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	within(t, "the operator Deployment available", func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: install.Name}, &d); err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("%d available: %s", d.Status.AvailableReplicas, podStates(ctx, cl, install.DefaultNamespace))
		}
		return nil
	})

	checkOperatorServing(t, c, cl)

	src := o
	src.Namespace = install.DefaultConfigNamespace // the only namespace the operator reads sources from
	if err := c.CreateCloudConfigSecret(ctx, src); err != nil {
		t.Fatal(err)
	}
	ccm := &v1alpha1.CloudControllerManager{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.SingletonName},
		Spec: v1alpha1.CloudControllerManagerSpec{Platform: "local", ClusterName: o.ClusterName, ClusterCIDR: o.ClusterCIDR,
			CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: src.Namespace, Name: o.CloudConfig.Name}}}
	if err := cl.Create(ctx, ccm); err != nil {
		t.Fatal(err)
	}
	available := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, realTimeout)
		defer cancel()
		start := time.Now()
		msg, err := install.WaitAvailable(ctx, cl)
		if err != nil {
			t.Fatalf("%s: %v; pods: %s", what, err, podStates(context.Background(), cl, o.Namespace))
		}
		t.Logf("%s: %s (%s)", what, time.Since(start).Round(time.Second), msg)
	}
	within(t, "the operator's CCM Deployment available beside the static pod", func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: render.DeploymentName}, &d); err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 2 {
			return fmt.Errorf("%d of 2 available: %s", d.Status.AvailableReplicas, podStates(ctx, cl, o.Namespace))
		}
		return nil
	})
	if h := leaseHolder(ctx, t, cl, o.Namespace); h != staticHolder {
		t.Errorf("the Lease moved to %q while the static pod ran: two active CCMs", h)
	}
	handOver(t, c, cfg, cl, o.Namespace, staticHolder)
	available("the CCM Available")
	within(t, "every Node initialized by the operator's CCM", func(ctx context.Context) error {
		var nodes corev1.NodeList
		if err := cl.List(ctx, &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if n.Spec.ProviderID == "" {
				return fmt.Errorf("node %s has no provider ID", n.Name)
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
					return fmt.Errorf("node %s is still uninitialized", n.Name)
				}
			}
		}
		return nil
	})

	// The static pod initialized the Nodes; the Deployment's CCM proves itself on a Node
	// made uninitialized again, still with no CNI.
	retaint := time.Now()
	poll.EventuallyContext(t, "taint node-2 uninitialized again", func(ctx context.Context) error {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: c.Nodes[1].Name}, &n); err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		return cl.Update(ctx, &n)
	})
	within(t, "the Deployment's CCM initializes node-2 again, with no CNI", func(ctx context.Context) error {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: c.Nodes[1].Name}, &n); err != nil {
			return err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
				return fmt.Errorf("still tainted %s after the taint came back", time.Since(retaint).Round(time.Second))
			}
		}
		return nil
	})
	if err := nodesReady(ctx, cl, corev1.ConditionFalse); err != nil {
		t.Errorf("a CNI came back before the checks ran: %v", err)
	}
	restoreCNI(t, cl, saved)

	// A cloud config change rolls the CCM's pods, and the new ones lead.
	var d appsv1.Deployment
	if err := cl.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: render.DeploymentName}, &d); err != nil {
		t.Fatal(err)
	}
	hash := d.Spec.Template.Annotations[profiles.AnnotationConfigHash]
	var secret corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: o.CloudConfig.Name}, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data[o.CloudConfig.Key] = append(secret.Data[o.CloudConfig.Key], []byte("requestTimeout: 20s\n")...)
	if err := cl.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	within(t, "the CCM rolled for the new cloud config", func(ctx context.Context) error {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: render.DeploymentName}, &d); err != nil {
			return err
		}
		if d.Spec.Template.Annotations[profiles.AnnotationConfigHash] == hash {
			return fmt.Errorf("config hash unchanged")
		}
		if d.Status.UpdatedReplicas != *d.Spec.Replicas || d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return fmt.Errorf("rollout: %d updated, %d available of %d", d.Status.UpdatedReplicas, d.Status.AvailableReplicas, *d.Spec.Replicas)
		}
		return nil
	})
	available("the CCM Available after the roll")

	// Upgrade and downgrade: the same image pushed under another tag, so the change is
	// the version alone. The rollout replaces one pod at a time; the Lease has one
	// holder at any time, and the samples say how long it had none.
	archive := filepath.Join(localcluster.ImageDir(bin), images.CloudControllerManager.Name+".tar")
	if _, err := c.Registry.PushArchive(ctx, archive, images.CloudControllerManager.Ref("v2")); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v2", images.DefaultVersion} {
		poll.EventuallyContext(t, "set version "+v, func(ctx context.Context) error {
			var got v1alpha1.CloudControllerManager
			if err := cl.Get(ctx, client.ObjectKeyFromObject(ccm), &got); err != nil {
				return err
			}
			got.Spec.Version = v
			return cl.Update(ctx, &got)
		})
		var holders []string
		var free, longestFree time.Duration
		last := time.Now()
		within(t, "rolled to version "+v, func(ctx context.Context) error {
			now := time.Now()
			if h := leaseHolder(ctx, t, cl, o.Namespace); h == "" {
				free += now.Sub(last)
				longestFree = max(longestFree, free)
			} else {
				free = 0
				if len(holders) == 0 || holders[len(holders)-1] != h {
					holders = append(holders, h)
				}
			}
			last = now
			var got v1alpha1.CloudControllerManager
			if err := cl.Get(ctx, client.ObjectKeyFromObject(ccm), &got); err != nil {
				return err
			}
			if len(got.Status.Versions) != 1 || got.Status.Versions[0].Version != v {
				return fmt.Errorf("versions %+v; pods: %s", got.Status.Versions, podStates(ctx, cl, o.Namespace))
			}
			return nil
		})
		available("the CCM Available at " + v)
		t.Logf("version %s: leaders in turn %v; the Lease was free at most %s (sampled)", v, holders, longestFree.Round(100*time.Millisecond))
	}

	// Removed: the CCM goes, the Nodes stay.
	poll.EventuallyContext(t, "set Removed", func(ctx context.Context) error {
		var got v1alpha1.CloudControllerManager
		if err := cl.Get(ctx, client.ObjectKeyFromObject(ccm), &got); err != nil {
			return err
		}
		got.Spec.ManagementState = v1alpha1.Removed
		return cl.Update(ctx, &got)
	})
	within(t, "the CCM's pods gone", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabels(render.SelectorLabels)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil || len(nodes.Items) != 2 {
		t.Errorf("nodes after Removed: %d (%v), want 2", len(nodes.Items), err)
	}
}

func within(t *testing.T, what string, cond func(context.Context) error) {
	t.Helper()
	start := time.Now()
	poll.WithinContext(t, realTimeout, what, cond)
	t.Logf("%s: %s", what, time.Since(start).Round(time.Second))
}

// podStates says what each pod in namespace is doing, for a wait's message.
func podStates(ctx context.Context, cl client.Client, namespace string) string {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range pods.Items {
		state := string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				state += " " + cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
			}
		}
		s = append(s, p.Name+" on "+p.Spec.NodeName+" "+state)
	}
	return strings.Join(s, "; ")
}
