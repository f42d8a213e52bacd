// Command nephele is nephele's command line:
//
//   - `nephele up` runs a whole cluster with the local cloud and a cloud-controller-manager
//     on one machine (docs/up.md);
//   - `nephele conformance` proves a provider against the conformance suite
//     (docs/conformance.md);
//   - `nephele node` runs inside a local cloud host and makes it a Kubernetes node;
//   - `nephele manifests` renders what a cluster needs to run the cloud-controller-manager
//     in it (docs/deploy.md);
//   - `nephele images` builds nephele's in-cluster images, or a provider's, as OCI
//     archives (docs/deploy.md);
//   - `nephele migrate plan|status|check` moves a cluster's cloud controllers to nephele
//     without a gap, and checks the result (docs/migration.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, the default handling comes back: a second Ctrl-C kills
	// nephele at once, and the kernel kills its child processes with it.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "nephele:", err)
		stop()
		os.Exit(1)
	}
}

// newRootCommand returns the nephele command with every subcommand.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "nephele",
		Short: "Kubernetes cloud integration out of tree",
		Long: `nephele runs Kubernetes cloud integration out of tree: a cloud-controller-manager
runtime, the cloud controllers, and a local cloud to run them against on one machine.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newUpCommand(),
		newConformanceCommand(),
		newNodeCommand(),
		newMigrateCommand(),
		newManifestsCommand(),
		newImagesCommand(),
		// New subcommands: one line each here.
	)
	return root
}
