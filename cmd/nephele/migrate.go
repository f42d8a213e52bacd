package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/handover"
	"github.com/nephele-dev/nephele/manager/migration"
)

// migrateOptions are the flags every `nephele migrate` command shares.
type migrateOptions struct {
	kubeconfig, context string
	namespace           string
	lease               string
	migrationLease      string
	// now is the clock; tests set it.
	now func() time.Time
}

func newMigrateCommand() *cobra.Command {
	o := &migrateOptions{namespace: handover.DefaultNamespace, now: time.Now}
	cmd := &cobra.Command{
		Use:   "migrate plan|status|check",
		Short: "Move the cloud controllers to nephele without a gap, and check the result",
		Long: `migrate helps move a running cluster's cloud controllers from kube-controller-manager
(with an in-tree cloud provider) or from another cloud-controller-manager to nephele's,
under leader migration, so that no controller runs twice or nowhere (docs/migration.md).
Each command only reads the cluster.

  plan    prints the ordered steps of the move for this cluster
  status  shows who runs which controller: the leases, their holders, their renewals
  check   gives the verdict after the move; exits 1 when a check fails`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use")
	f.StringVar(&o.namespace, "namespace", o.namespace, "namespace of the controller managers' leases and workloads")
	f.StringVar(&o.lease, "lease", "", "nephele's main lease (its --leader-elect-resource-name); default cloud-controller-manager (plan picks "+
		handover.SeparateLease+" when the cloud-controller-manager it replaces holds that one)")
	f.StringVar(&o.migrationLease, "migration-lease", "", "the migration lease (leaderName); default "+migration.DefaultLeaderName)
	cmd.AddCommand(newMigratePlanCommand(o), newMigrateStatusCommand(o), newMigrateCheckCommand(o))
	return cmd
}

// client returns a client for the cluster the flags name.
func (o *migrateOptions) client() (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg = rest.AddUserAgent(cfg, "nephele-migrate")
	return kubernetes.NewForConfig(cfg)
}

func (o *migrateOptions) survey(ctx context.Context) (*handover.Snapshot, error) {
	client, err := o.client()
	if err != nil {
		return nil, err
	}
	return handover.Survey(ctx, client, o.namespace, o.now())
}

func parseSource(flag, value string) (handover.Source, error) {
	switch handover.Source(value) {
	case "", handover.FromKubeControllerManager, handover.FromCloudControllerManager:
		return handover.Source(value), nil
	}
	return "", fmt.Errorf("invalid value for --%s: %q: must be kube-controller-manager or cloud-controller-manager", flag, value)
}

func newMigratePlanCommand(o *migrateOptions) *cobra.Command {
	var from string
	var rollback bool
	t := handover.Target{}
	cmd := &cobra.Command{
		Use:   "plan [--from kube-controller-manager|cloud-controller-manager] [--rollback]",
		Short: "Print the steps to move this cluster's cloud controllers to nephele (or back)",
		Long: `plan reads the cluster (Nodes, the leases in kube-system, the control plane's workloads and
their flags, LoadBalancer Services) and prints the ordered steps of the move to nephele's
cloud-controller-manager: the LeaderMigrationConfiguration each side reads, the flags to
change on kube-apiserver, kube-controller-manager, the cloud-controller-managers and the
kubelets, and the check after each step. --rollback prints the way back. It changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := parseSource("from", from)
			if err != nil {
				return err
			}
			t.Lease, t.MigrationLease = o.lease, o.migrationLease
			return runMigratePlan(cmd.Context(), cmd.OutOrStdout(), o, src, rollback, t)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "what runs the cloud controllers now: kube-controller-manager or cloud-controller-manager (default: read from the cluster)")
	f.BoolVar(&rollback, "rollback", false, "print the steps back from nephele to --from")
	f.StringVar(&t.Provider, "provider", "", "nephele's --cloud-provider: Nodes' provider IDs must be of it")
	f.StringVar(&t.InTreeProvider, "in-tree-provider", "", "the in-tree provider kube-controller-manager runs (default: read from its flags)")
	f.StringVar(&t.ConfigDir, "config-dir", "/etc/kubernetes", "where the steps put the migration config files")
	return cmd
}

func runMigratePlan(ctx context.Context, out io.Writer, o *migrateOptions, from handover.Source, rollback bool, t handover.Target) error {
	if from == "" && rollback {
		return errors.New("migrate plan: --rollback needs --from: the component to move the controllers back to")
	}
	s, err := o.survey(ctx)
	if err != nil {
		return fmt.Errorf("migrate plan: %w", err)
	}
	why := "--from " + string(from)
	if from == "" {
		if from, why, err = handover.DetectSource(s, t.Lease); err != nil {
			return fmt.Errorf("migrate plan: %w", err)
		}
	}
	t.Specs = controllers.Default()
	rb, err := handover.NewRunbook(s, handover.Move{From: from, Rollback: rollback}, t)
	if err != nil {
		return fmt.Errorf("migrate plan: %w", err)
	}
	rb.Why = why
	return rb.WriteText(out)
}

func newMigrateStatusCommand(o *migrateOptions) *cobra.Command {
	var watch bool
	var interval time.Duration
	var configFile string
	cmd := &cobra.Command{
		Use:   "status [--watch]",
		Short: "Show who runs which cloud controller: leases, holders, renewals",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return fmt.Errorf("invalid value for --interval: %s: must be positive", interval)
			}
			var cfg *migration.Config
			if configFile != "" {
				c, err := migration.Load(configFile)
				if err != nil {
					return fmt.Errorf("invalid value for --leader-migration-config: %w", err)
				}
				cfg = c
			}
			specs := controllers.Default()
			migrated, err := handover.MigratedControllers(cfg, specs)
			if err != nil {
				return fmt.Errorf("invalid value for --leader-migration-config: %w", err)
			}
			leases := handover.Leases{Nephele: o.lease, Migration: o.migrationLease}
			if cfg != nil && o.migrationLease == "" {
				leases.Migration = cfg.LeaderName
			}
			show := func() error {
				s, err := o.survey(cmd.Context())
				if err != nil {
					return fmt.Errorf("migrate status: %w", err)
				}
				return handover.NewStatus(s, leases, specs, migrated).WriteText(cmd.OutOrStdout())
			}
			if !watch {
				return show()
			}
			for {
				fmt.Fprintf(cmd.OutOrStdout(), "%s (every %s)\n", o.now().UTC().Format(time.RFC3339), interval)
				if err := show(); err != nil {
					// A watch rides out an unreachable apiserver (it may be restarting
					// during the move) and says so.
					fmt.Fprintln(cmd.ErrOrStderr(), err)
				}
				fmt.Fprintln(cmd.OutOrStdout())
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&watch, "watch", "w", false, "refresh until interrupted")
	f.DurationVar(&interval, "interval", 2*time.Second, "how often --watch refreshes")
	f.StringVar(&configFile, "leader-migration-config", "", "nephele's LeaderMigrationConfiguration, to know which controllers the migration lease guards (default: upstream's default)")
	return cmd
}

func newMigrateCheckCommand(o *migrateOptions) *cobra.Command {
	var from, fromLease string
	co := handover.CheckOptions{UninitializedBound: handover.DefaultUninitializedBound}
	cmd := &cobra.Command{
		Use:   "check [--from kube-controller-manager|cloud-controller-manager]",
		Short: "Check that the move to nephele is complete; exit 1 if not",
		Long: `check gives the verdict after a move: every Node has a provider ID, none stays uninitialized
longer than --uninitialized-bound, every LoadBalancer Service nephele serves has the cleanup
finalizer and an address (and none is stuck in deletion), nephele holds its lease, the
migration lease is gone, stale or nephele's, and the old component holds nothing. It prints
a line per check that passed and one per failure naming the object and the fix, and exits 1
when anything failed (or the cluster could not be read).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := parseSource("from", from)
			if err != nil {
				return err
			}
			if co.UninitializedBound <= 0 {
				return fmt.Errorf("invalid value for --uninitialized-bound: %s: must be positive", co.UninitializedBound)
			}
			co.From = src
			co.Leases = handover.Leases{Nephele: o.lease, Migration: o.migrationLease, Old: fromLease}
			if co.Leases.Old == "" && src == handover.FromKubeControllerManager {
				co.Leases.Old = handover.KubeControllerManagerLease
			}
			s, err := o.survey(cmd.Context())
			if err != nil {
				return fmt.Errorf("migrate check: %w", err)
			}
			v := handover.Check(s, co)
			if err := v.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if !v.Passed() {
				return fmt.Errorf("migrate check: %d failed", len(v.Failed()))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the component the controllers moved from: kube-controller-manager or cloud-controller-manager (default: check for both)")
	f.StringVar(&fromLease, "from-lease", "", "the old cloud-controller-manager's main lease (default: any other lease named *cloud-controller-manager*)")
	f.StringVar(&co.Provider, "provider", "", "nephele's --cloud-provider: Nodes' provider IDs must be of it")
	f.DurationVar(&co.UninitializedBound, "uninitialized-bound", co.UninitializedBound, "how long a Node may stay uninitialized, and a Service in deletion")
	f.StringVar(&co.LoadBalancerClass, "load-balancer-class", "", "nephele's --load-balancer-class: Services of other classes are left out")
	return cmd
}
