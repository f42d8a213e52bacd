package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/waitfor"
	"github.com/nephele-dev/nephele/providers/local"
)

// CCMManifests are the options of the in-cluster CCM's manifests: `nephele manifests`'
// defaults with this cluster's name, pod range and replicas, and Config.CCMArgs as extra
// flags. A test that installs the CCM itself renders them the same way.
func (c *Cluster) CCMManifests() render.Options {
	o := render.DefaultOptions()
	if pinned, err := c.PinnedImage(images.CloudControllerManager); err == nil {
		o.Image = pinned
	}
	o.Replicas = c.cfg.CCMReplicas
	o.ClusterName = c.cfg.ClusterName
	o.ClusterCIDR = c.cfg.ClusterCIDR.String()
	o.ExtraArgs = append([]string(nil), c.cfg.CCMArgs...)
	return o
}

// CreateCloudConfigSecret creates the Secret the in-cluster CCM reads its cloud config
// from (the default of `nephele manifests`): the local cloud's URL, on the bridge's
// address that pods on the nodes reach, and its token.
func (c *Cluster) CreateCloudConfigSecret(ctx context.Context, o render.Options) error {
	cfg, err := c.CloudConfig()
	if err != nil {
		return err
	}
	return c.createSecret(ctx, o.Namespace, o.CloudConfig.Name, o.CloudConfig.Key, cfg)
}

// createSecret creates the Secret namespace/name holding data at key; one that exists is
// left as it is.
func (c *Cluster) createSecret(ctx context.Context, namespace, name, key string, data []byte) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       map[string][]byte{key: data},
	}
	_, err := c.Env.Client.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}

// writeManifests writes a rendering to Dir/name (e.g. "ccm/cloud-controller-manager.yaml")
// and returns its path: the file users would apply, kept with the cluster's logs.
func (c *Cluster) writeManifests(name string, data []byte) (string, error) {
	path := filepath.Join(c.cfg.Dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// CloudConfig is the local provider's --cloud-config for a CCM in the cluster: the cloud's
// URL, on the bridge's address that pods on the nodes reach, the CCM's token and the
// cloud's CA certificate inline (a pod has no file of the machine's): never the
// administrator's token.
func (c *Cluster) CloudConfig() ([]byte, error) {
	return c.podCloudConfig(c.CCMTokenFile, "the CCM's", "nephele's localcluster")
}

// podCloudConfig is the local provider's cloud config for a component running in a pod:
// the cloud's URL on the bridge, the token in tokenFile (whose is names it in errors)
// and the cloud's CA certificate inline.
func (c *Cluster) podCloudConfig(tokenFile, whose, comment string) ([]byte, error) {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("read %s cloud token: %w", whose, err)
	}
	ca, err := os.ReadFile(c.CloudCAFile)
	if err != nil {
		return nil, fmt.Errorf("read the local cloud's CA certificate: %w", err)
	}
	return local.File{Endpoint: c.CloudURL, Token: strings.TrimSpace(string(token)), CAData: string(ca)}.Marshal(comment)
}

// RunKubectl runs the cluster's kubectl as the admin with stdin and returns its output
// (stdout and stderr); an error carries the output.
func (c *Cluster) RunKubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl, append([]string{"--kubeconfig", c.Env.Kubeconfig}, args...)...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// startInClusterCCM installs the CCM as users do: the cloud config Secret, then the
// rendered manifests, written to Dir/ccm/cloud-controller-manager.yaml and applied with
// kubectl; then it waits until the Deployment is available and a replica holds the lease.
func (c *Cluster) startInClusterCCM(ctx context.Context) (string, error) {
	o := c.CCMManifests()
	objs, err := render.Render(o)
	if err != nil {
		return "", fmt.Errorf("render the CCM's manifests: %w", err)
	}
	data, err := render.YAML(objs)
	if err != nil {
		return "", err
	}
	path, err := c.writeManifests(filepath.Join("ccm", "cloud-controller-manager.yaml"), data)
	if err != nil {
		return "", err
	}
	if err := c.CreateCloudConfigSecret(ctx, o); err != nil {
		return "", err
	}
	if _, err := c.RunKubectl(ctx, nil, "apply", "-f", path); err != nil {
		return "", err
	}
	holder, err := c.WaitInClusterCCM(ctx, o)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s applied; %d replicas available, %s leads", path, o.Replicas, holder), nil
}

// WaitInClusterCCM waits until the CCM Deployment that o describes has every replica
// available and one of its pods holds the leader lease, and returns the holder. On
// failure it says what each pod is doing, with the end of its log.
func (c *Cluster) WaitInClusterCCM(ctx context.Context, o render.Options) (string, error) {
	var holder string
	err := waitfor.Condition(ctx, startTimeout(ctx), func(ctx context.Context) error {
		d, err := c.Env.Client.AppsV1().Deployments(o.Namespace).Get(ctx, render.DeploymentName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !deploymentAvailable(d) {
			return fmt.Errorf("deployment %s/%s: %d of %d replicas available, %d updated", d.Namespace, d.Name,
				d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1), d.Status.UpdatedReplicas)
		}
		lease, err := c.Env.Client.CoordinationV1().Leases(o.Namespace).Get(ctx, render.LeaseName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("lease %s/%s: %w", o.Namespace, render.LeaseName, err)
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		if holder == "" {
			return fmt.Errorf("lease %s/%s has no holder", o.Namespace, render.LeaseName)
		}
		return nil
	})
	if err != nil {
		return "", errors.Join(err, c.ccmPodDiagnostics(context.WithoutCancel(ctx), o.Namespace))
	}
	return holder, nil
}

// deploymentAvailable reports whether every replica of d is updated and available and
// the Deployment controller has seen its latest spec.
func deploymentAvailable(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
}

// ccmPodDiagnostics describes the CCM's pods in namespace (podDiagnostics).
func (c *Cluster) ccmPodDiagnostics(ctx context.Context, namespace string) error {
	return c.podDiagnostics(ctx, namespace, labels.SelectorFromSet(render.SelectorLabels))
}

// podDiagnostics describes the pods selector selects in namespace (the CCM's, the CSI
// driver's): phase, node, container states, and the end of each container's log.
func (c *Cluster) podDiagnostics(ctx context.Context, namespace string, selector labels.Selector) error {
	pods, err := c.Env.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return fmt.Errorf("list the pods %s in %s: %w", selector, namespace, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("no pods %s in %s", selector, namespace)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\npod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				fmt.Fprintf(&b, "; %s: %s", cond.Type, cond.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				fmt.Fprintf(&b, "; %s terminated: %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
		}
		for _, ctr := range p.Spec.Containers {
			raw, err := c.Env.Client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: ptr.To[int64](15)}).DoRaw(ctx)
			if err == nil && len(raw) > 0 {
				fmt.Fprintf(&b, "\n  %s log:\n    %s", ctr.Name, strings.ReplaceAll(strings.TrimSpace(string(raw)), "\n", "\n    "))
			}
		}
	}
	return errors.New(strings.TrimPrefix(b.String(), "\n"))
}
