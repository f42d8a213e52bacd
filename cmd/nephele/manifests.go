package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nephele-dev/nephele/deploy/render"
)

// newManifestsCommand returns `nephele manifests`: everything a cluster needs to run a
// cloud-controller-manager, rendered from flags.
func newManifestsCommand() *cobra.Command {
	o := render.DefaultOptions()
	var kustomizeDir string
	var permissions bool
	cmd := &cobra.Command{
		Use:   "manifests [flags]",
		Short: "Render the cloud-controller-manager's Deployment, RBAC and Service as YAML",
		Long: `manifests renders everything a cluster needs to run nephele's cloud-controller-manager in
it: its ServiceAccount, least-privilege RBAC (derived from what the manager and the enabled
controllers call; no wildcard), a Deployment that runs before a CNI exists, a
PodDisruptionBudget, a metrics Service and, with --service-monitor, a ServiceMonitor.

It writes one YAML stream to standard output, for kubectl apply -f -. With --kustomize-dir it
writes the same objects as a kustomize base instead; with --permissions, the table of every
permission granted and the code path that needs it. The defaults render deploy/ (docs/deploy.md).

The cloud config is not rendered: create the Secret (or ConfigMap) it names first, e.g.
  kubectl -n kube-system create secret generic nephele-cloud-config --from-file=cloud.conf=local.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManifests(cmd.OutOrStdout(), o, kustomizeDir, permissions)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&kustomizeDir, "kustomize-dir", "", "write a kustomize base to this directory instead of YAML to standard output")
	cmd.Flags().BoolVar(&permissions, "permissions", false, "print the permissions table (Markdown) instead of the objects")
	cmd.AddCommand(newCSIManifestsCommand())
	return cmd
}

// newCSIManifestsCommand returns `nephele manifests csi`: everything a cluster needs to
// run nephele's CSI driver, rendered from flags.
func newCSIManifestsCommand() *cobra.Command {
	o := render.DefaultCSIOptions()
	var kustomizeDir string
	cmd := &cobra.Command{
		Use:   "csi [flags]",
		Short: "Render the CSI driver's CSIDriver, controller Deployment, node DaemonSet, RBAC and default StorageClass as YAML",
		Long: `csi renders everything a cluster needs to run nephele's CSI driver (docs/volumes.md): the
controller's and the node plugin's ServiceAccounts and least-privilege RBAC (the CSI sidecars'
own rules, no wildcard), the CSIDriver object, the controller Deployment (csi-driver beside
external-provisioner, -attacher and -resizer), the node plugin DaemonSet (privileged, with
kubelet's directory mounted Bidirectional) and the default StorageClass.

It writes one YAML stream to standard output, for kubectl apply -f -; with --kustomize-dir, a
kustomize base instead.

The controller's cloud config is not rendered: create the Secret it reads first, holding a
credential that may manage volumes (for the local cloud, the token of localcloud
--csi-token-file), e.g.
  kubectl -n kube-system create secret generic ` + render.CSICloudConfigSecret + ` --from-file=` + render.CSICloudConfigKey + `=local-csi.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := render.RenderCSI(o)
			if err != nil {
				return err
			}
			return writeObjects(cmd.OutOrStdout(), objs, kustomizeDir)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&kustomizeDir, "kustomize-dir", "", "write a kustomize base to this directory instead of YAML to standard output")
	return cmd
}

func runManifests(stdout io.Writer, o render.Options, kustomizeDir string, permissions bool) error {
	if permissions {
		if kustomizeDir != "" {
			return errors.New("--permissions and --kustomize-dir: give one")
		}
		table, err := render.PermissionsTable(o)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, table)
		return err
	}
	objs, err := render.Render(o)
	if err != nil {
		return err
	}
	return writeObjects(stdout, objs, kustomizeDir)
}

// writeObjects writes objs as one YAML stream to stdout or, with kustomizeDir, as a
// kustomize base there.
func writeObjects(stdout io.Writer, objs []*unstructured.Unstructured, kustomizeDir string) error {
	if kustomizeDir == "" {
		data, err := render.YAML(objs)
		if err != nil {
			return err
		}
		_, err = stdout.Write(data)
		return err
	}
	files, err := render.KustomizeBase(objs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(kustomizeDir, 0o755); err != nil {
		return fmt.Errorf("--kustomize-dir: %w", err)
	}
	// A file an earlier rendering wrote that the new base does not list (monitoring.yaml
	// without --service-monitor) would be a stale resource beside it; files nephele did
	// not write are left alone.
	old, err := filepath.Glob(filepath.Join(kustomizeDir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("--kustomize-dir: %w", err)
	}
	for _, f := range old {
		if _, keep := files[filepath.Base(f)]; keep {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--kustomize-dir: %w", err)
		}
		if render.IsRendered(data) {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("--kustomize-dir: %w", err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(kustomizeDir, name), files[name], 0o644); err != nil {
			return fmt.Errorf("--kustomize-dir: %w", err)
		}
	}
	return nil
}
