package localcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/waitfor"
)

// CSIManifests are the options of the cluster's CSI driver manifests: `nephele manifests
// csi`'s defaults with the images by the digests Start pushed, and the hosts'
// directory as the device directory (the local cloud's disk links are in each host's
// directory, and lead to the machine's loop devices).
func (c *Cluster) CSIManifests() (render.CSIOptions, error) {
	o := render.DefaultCSIOptions()
	for _, img := range []struct {
		program images.Program
		into    *string
	}{
		{images.CSIDriver, &o.DriverImage},
		{images.CSIProvisioner.Program, &o.ProvisionerImage},
		{images.CSIAttacher.Program, &o.AttacherImage},
		{images.CSIResizer.Program, &o.ResizerImage},
	} {
		pinned, err := c.PinnedImage(img.program)
		if err != nil {
			return render.CSIOptions{}, err
		}
		*img.into = pinned
	}
	o.DeviceDirs = []string{c.cfg.hostDir()}
	if c.cfg.VolumeAttachLimit > 0 {
		o.MaxVolumesPerNode = int64(c.cfg.VolumeAttachLimit)
	}
	return o, nil
}

// CSICloudConfig is the local provider's --cloud-config for the CSI driver's controller:
// the cloud's URL on the bridge, the CSI role's token (never the CCM's or the
// administrator's) and the cloud's CA certificate inline.
func (c *Cluster) CSICloudConfig() ([]byte, error) {
	return c.podCloudConfig(c.first.CSITokenFile, "the CSI driver's", "nephele's localcluster (CSI driver)")
}

// deployCSI installs the CSI driver as users do: the cloud config Secret, then the
// rendered manifests, written to Dir/csi/csi-driver.yaml and applied with kubectl; then
// it waits until the controller is available, the node plugin runs on every node, and
// kubelet of every node has registered the driver (its CSINode lists it).
func (c *Cluster) deployCSI(ctx context.Context) (string, error) {
	o, err := c.CSIManifests()
	if err != nil {
		return "", err
	}
	objs, err := render.RenderCSI(o)
	if err != nil {
		return "", fmt.Errorf("render the CSI driver's manifests: %w", err)
	}
	data, err := render.YAML(objs)
	if err != nil {
		return "", err
	}
	path, err := c.writeManifests(filepath.Join("csi", "csi-driver.yaml"), data)
	if err != nil {
		return "", err
	}
	cfg, err := c.CSICloudConfig()
	if err != nil {
		return "", err
	}
	if err := c.createSecret(ctx, o.Namespace, render.CSICloudConfigSecret, render.CSICloudConfigKey, cfg); err != nil {
		return "", err
	}
	if _, err := c.RunKubectl(ctx, nil, "apply", "-f", path); err != nil {
		return "", err
	}
	if err := c.WaitCSI(ctx, o); err != nil {
		return "", err
	}
	return path + " applied; " + c.csiServing(o), nil
}

// csiServing says what WaitCSI found: the driver registered on every node and the
// default StorageClass.
func (c *Cluster) csiServing(o render.CSIOptions) string {
	return fmt.Sprintf("driver %s registered on %s, StorageClass %s is the default", o.DriverName, plural(len(c.Nodes), "node"), render.CSIStorageClass)
}

// WaitCSI waits until the CSI driver o describes serves: the controller Deployment
// available, the node DaemonSet ready on every node, and every node's CSINode listing
// the driver. On failure it says what the driver's pods are doing.
func (c *Cluster) WaitCSI(ctx context.Context, o render.CSIOptions) error {
	cs := c.Env.Client
	err := waitfor.Condition(ctx, startTimeout(ctx), func(ctx context.Context) error {
		d, err := cs.AppsV1().Deployments(o.Namespace).Get(ctx, render.CSIControllerName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !deploymentAvailable(d) {
			return fmt.Errorf("deployment %s/%s: %d of %d replicas available", d.Namespace, d.Name, d.Status.AvailableReplicas, o.ControllerReplicas)
		}
		ds, err := cs.AppsV1().DaemonSets(o.Namespace).Get(ctx, render.CSINodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.ObservedGeneration < ds.Generation || ds.Status.DesiredNumberScheduled == 0 ||
			ds.Status.NumberReady != ds.Status.DesiredNumberScheduled || ds.Status.UpdatedNumberScheduled != ds.Status.DesiredNumberScheduled {
			return fmt.Errorf("daemonset %s/%s: %d of %d pods ready", ds.Namespace, ds.Name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		for _, n := range c.Nodes {
			cn, err := cs.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("CSINode %s: %w", n.Name, err)
			}
			if !slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == o.DriverName }) {
				return fmt.Errorf("kubelet of node %s has not registered driver %s yet", n.Name, o.DriverName)
			}
		}
		return nil
	})
	if err != nil {
		return errors.Join(err, c.podDiagnostics(context.WithoutCancel(ctx), o.Namespace, labels.SelectorFromSet(render.CSISelectorLabels)))
	}
	return nil
}

// VolumesLeft returns an error naming the volumes the cloud still holds and the
// PersistentVolumes the cluster still has, nil when there are none: what deleting every
// claim of the default StorageClass (reclaim policy Delete) must come to.
func (c *Cluster) VolumesLeft(ctx context.Context) error {
	vols, err := c.Cloud.ListVolumes(ctx)
	if err != nil {
		return err
	}
	if len(vols) > 0 {
		left := make([]string, len(vols))
		for i, v := range vols {
			left[i] = fmt.Sprintf("%s (%s)", v.ID, v.State)
		}
		return errors.New("volumes left in the cloud: " + strings.Join(left, ", "))
	}
	pvs, err := c.Env.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(pvs.Items) > 0 {
		return fmt.Errorf("%d PersistentVolumes left", len(pvs.Items))
	}
	return nil
}
