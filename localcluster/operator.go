package localcluster

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/install"
	"github.com/nephele-dev/nephele/operator/scheme"
)

// startOperatorCCM installs nephele-operator as docs/operator.md tells users to (its
// manifests written to Dir/operator/operator.yaml and applied with kubectl
// --server-side), creates the cloud config Secret and the CloudControllerManager of the
// local platform (with Config.Volumes, spec.volumes and the CSI driver's own cloud
// config Secret), and waits until the operator reports it Available: its Deployment
// available and a replica holding the Lease (and the CSI driver's controller available).
func (c *Cluster) startOperatorCCM(ctx context.Context) (_ string, err error) {
	opts := install.DefaultOptions()
	if opts.Image, err = c.PinnedImage(images.Operator); err != nil {
		return "", err
	}
	ccmImage, err := c.PinnedImage(images.CloudControllerManager)
	if err != nil {
		return "", err
	}
	objs, err := install.Render(opts)
	if err != nil {
		return "", fmt.Errorf("render the operator's manifests: %w", err)
	}
	data, err := install.YAML(objs)
	if err != nil {
		return "", err
	}
	path, err := c.writeManifests(filepath.Join("operator", "operator.yaml"), data)
	if err != nil {
		return "", err
	}
	if _, err := c.RunKubectl(ctx, nil, "apply", "--server-side", "-f", path); err != nil {
		return "", err
	}
	o := c.CCMManifests()
	// The cloud config's source lives in the config namespace, the only one whose
	// Secrets the operator may read.
	src := o
	src.Namespace = opts.ConfigNamespace
	if err := c.CreateCloudConfigSecret(ctx, src); err != nil {
		return "", err
	}
	cl, err := client.New(c.Env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return "", fmt.Errorf("operator client: %w", err)
	}
	spec := v1alpha1.CloudControllerManagerSpec{
		Platform:    "local",
		Replicas:    ptr.To(int32(o.Replicas)),
		ClusterName: o.ClusterName,
		ClusterCIDR: o.ClusterCIDR,
		CloudConfig: &v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: src.Namespace, Name: o.CloudConfig.Name, Key: o.CloudConfig.Key},
		ExtraArgs:   o.ExtraArgs,
		Image:       ccmImage,
	}
	if c.cfg.Volumes {
		if spec.Volumes, err = c.operatorVolumes(ctx, opts.ConfigNamespace); err != nil {
			return "", err
		}
	}
	if err := install.ApplyCloudControllerManager(ctx, cl, spec); err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, startTimeout(ctx))
	defer cancel()
	msg, err := install.WaitAvailable(wctx, cl)
	if err != nil {
		return "", fmt.Errorf("the operator's CloudControllerManager: %w; %w", err, c.ccmPodDiagnostics(context.WithoutCancel(ctx), o.Namespace))
	}
	return fmt.Sprintf("%s applied; CloudControllerManager %s Available: %s", path, v1alpha1.SingletonName, msg), nil
}

// operatorVolumes creates the CSI driver's cloud config (the CSI role's token) in the
// config namespace, under the name the driver's own Secret has, and returns spec.volumes running the driver with the images Start
// pushed and the hosts' directory as its device directory.
func (c *Cluster) operatorVolumes(ctx context.Context, configNamespace string) (*v1alpha1.Volumes, error) {
	o, err := c.CSIManifests()
	if err != nil {
		return nil, err
	}
	cfg, err := c.CSICloudConfig()
	if err != nil {
		return nil, err
	}
	if err := c.createSecret(ctx, configNamespace, render.CSICloudConfigSecret, render.CSICloudConfigKey, cfg); err != nil {
		return nil, err
	}
	return &v1alpha1.Volumes{
		CloudConfig:      v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: configNamespace, Name: render.CSICloudConfigSecret, Key: render.CSICloudConfigKey},
		Image:            o.DriverImage,
		ProvisionerImage: o.ProvisionerImage,
		AttacherImage:    o.AttacherImage,
		ResizerImage:     o.ResizerImage,
		DeviceDirs:       o.DeviceDirs,
	}, nil
}

// waitOperatorCSI waits until the CSI driver nephele-operator runs for spec.volumes
// serves on every node, as deployCSI does for the one it applies.
func (c *Cluster) waitOperatorCSI(ctx context.Context) (string, error) {
	o, err := c.CSIManifests()
	if err != nil {
		return "", err
	}
	o.Namespace = install.DefaultOptions().OperandNamespace
	if err := c.WaitCSI(ctx, o); err != nil {
		return "", err
	}
	return c.csiServing(o), nil
}
