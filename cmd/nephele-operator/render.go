package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/atomicfile"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/bootstrap"
)

func newRenderCmd() *cobra.Command {
	o := bootstrap.Options{Namespace: render.DefaultNamespace, Version: images.DefaultVersion, HostDir: bootstrap.DefaultHostDir}
	var out, cloudConfig, caBundle string
	cmd := &cobra.Command{
		Use:   "render --platform local --out DIR --kubeconfig-path PATH",
		Short: "write a static pod (and the files it mounts) that runs the CCM on a bootstrap node",
		Long: `render writes DIR/` + bootstrap.ManifestFile + ` for the kubelet's staticPodPath and DIR/files/,
to copy to --host-dir on the node. The operator's Deployment takes over once the static pod is removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("invalid value for --out: \"\": required")
			}
			var err error
			if cloudConfig != "" {
				if o.CloudConfig, err = os.ReadFile(cloudConfig); err != nil {
					return fmt.Errorf("invalid value for --cloud-config: %w", err)
				}
			}
			if caBundle != "" {
				if o.CABundle, err = os.ReadFile(caBundle); err != nil {
					return fmt.Errorf("invalid value for --ca-bundle: %w", err)
				}
			}
			files, err := bootstrap.Render(o)
			if err != nil {
				return err
			}
			names := make([]string, 0, len(files))
			for n := range files {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				p := filepath.Join(out, n)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
				}
				if err := atomicfile.Write(p, files[n], 0o644); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Spec.Platform, "platform", "local", "the platform profile")
	fs.StringVar(&out, "out", "", "the directory to write")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "the static pod's namespace: the Deployment's, whose Lease both hold")
	fs.StringVar(&o.Version, "version", o.Version, "the CCM version (image tag)")
	fs.StringVar(&o.Spec.Image, "image", "", "the whole CCM image reference, instead of the profile's at --version")
	fs.StringVar(&o.Spec.Provider, "provider", "", "the CCM's --cloud-provider; default the profile's")
	fs.StringVar(&o.Spec.ClusterCIDR, "cluster-cidr", "", "the pod range; default the profile's")
	fs.StringVar(&o.Spec.ClusterName, "cluster-name", "", "the CCM's --cluster-name")
	fs.StringArrayVar(&o.Spec.ExtraArgs, "extra-arg", nil, "a further CCM flag, --name=value; repeatable")
	fs.StringVar(&o.Kubeconfig, "kubeconfig-path", "", "absolute path, on the node, of the kubeconfig the CCM uses (readable by uid 65532)")
	fs.StringVar(&o.HostDir, "host-dir", o.HostDir, "where DIR/files is copied on the node")
	fs.StringVar(&cloudConfig, "cloud-config", "", "the provider's cloud config file")
	fs.StringVar(&caBundle, "ca-bundle", "", "a PEM bundle the CCM trusts")
	o.Spec.ManagementState = v1alpha1.Managed
	return cmd
}
