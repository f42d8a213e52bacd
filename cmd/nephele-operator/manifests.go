package main

import (
	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/operator/install"
)

func newManifestsCmd() *cobra.Command {
	o := install.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "print the operator's own objects (CRD, RBAC, Deployment) as YAML for kubectl apply -f -",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := install.Render(o)
			if err != nil {
				return err
			}
			data, err := install.YAML(objs)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "the operator's namespace")
	fs.StringVar(&o.OperandNamespace, "operand-namespace", o.OperandNamespace, "the cloud-controller-manager's namespace")
	fs.StringVar(&o.ConfigNamespace, "config-namespace", o.ConfigNamespace, "the namespace of the CloudControllerManager's cloud config and CA sources, the only one whose Secrets the operator may read")
	fs.StringVar(&o.Image, "image", o.Image, "the operator image")
	fs.StringVar(&o.Version, "version", o.Version, "the CCM version the operator runs when the spec names none")
	fs.IntVar(&o.Replicas, "replicas", o.Replicas, "operator replicas; one leads")
	return cmd
}
