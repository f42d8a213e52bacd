package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/kubenode"
	"github.com/nephele-dev/nephele/localcluster"
)

// newNodeCommand returns `nephele node`: what runs on, and for, a real node.
func newNodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a real Kubernetes node inside a local cloud host, and build its images",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newNodeBootCommand(), newNodeImagesCommand())
	return cmd
}

func newNodeBootCommand() *cobra.Command {
	var config string
	var verbose int
	cmd := &cobra.Command{
		Use:   "boot --config FILE",
		Short: "Make this host a Kubernetes node until SIGTERM",
		Long: `boot is a local cloud host's boot command on a real node. Inside the host (a network
and mount namespace of its own, as root) it starts containerd, imports the images, starts
kubelet (--cloud-provider=external), waits for kube-controller-manager to give the Node a
pod CIDR, writes the CNI configuration for it, starts kube-proxy, and restarts any of them
that exits. On SIGTERM or SIGINT it stops them in order and removes what the node left
(containers, mounts, cgroups, iptables chains), then exits: 0 when nothing was left behind.

FILE is a NodeConfig (apiVersion ` + kubenode.APIVersion + `). Fields left out take their
values from the host's environment: nodeName from $` + kubenode.EnvInstanceName + `, nodeIP from
$` + kubenode.EnvInstanceAddress + `, hostDir from $` + kubenode.EnvHostDir + `, cgroupRoot from
$` + kubenode.EnvHostCgroup + `. The node's files and logs go to <hostDir>/node; its phase and
process IDs to <hostDir>/node/status.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNodeBoot(cmd.Context(), cmd.ErrOrStderr(), config, verbose)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the node configuration file (required)")
	cmd.Flags().IntVarP(&verbose, "verbose", "v", 0, "log level of the runtime's own log (1 adds each image, mount and sysctl)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

func runNodeBoot(ctx context.Context, stderr io.Writer, config string, verbose int) error {
	cfg, err := kubenode.LoadConfig(config)
	if err != nil {
		return err
	}
	node, err := cfg.Complete(os.Getenv, kubenode.LookPath)
	if err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-verbose)}))
	return kubenode.Boot(ctx, node, log)
}

func newNodeImagesCommand() *cobra.Command {
	var out, sourceDir, binDir string
	src := images.Source{URL: "https://github.com/nephele-dev/nephele", Version: images.DefaultVersion}
	cmd := &cobra.Command{
		Use:   "images --out DIR",
		Short: "Build the images a real cluster's registry serves (pause, demo-http, cloud-controller-manager, nephele-operator) as OCI archives",
		Long: `images compiles cmd/pause, cmd/demo-http, cmd/cloud-controller-manager and cmd/nephele-operator as static
binaries for this machine's platform (linux and its architecture: amd64 or arm64; the
nodes run here) and packs each into a reproducible OCI image (no docker), written to
DIR/<name>.tar: nephele up pushes them into the cluster's registry, and a node's images
list can import them. It also packs the cluster's add-ons that make tools builds from
their own modules (CoreDNS, from --bin-dir) the same way. It prints each image's
reference and digest. It needs the nephele source tree (--source-dir) and the go command.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNodeImages(cmd.Context(), cmd.OutOrStdout(), sourceDir, binDir, out, src)
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the archives to (required)")
	f.StringVar(&sourceDir, "source-dir", ".", "the nephele source tree (the directory of its go.mod, or below it)")
	f.StringVar(&binDir, "bin-dir", "", "where make tools put the add-ons' binaries (coredns); default the parent of --out")
	f.StringVar(&src.Version, "version", src.Version, "version label, and tag, of the images")
	f.StringVar(&src.Revision, "revision", "", "revision label of the images (the commit they are built from)")
	f.StringVar(&src.URL, "source", src.URL, "source label of the images")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func runNodeImages(ctx context.Context, stdout io.Writer, sourceDir, binDir, out string, src images.Source) error {
	moduleDir, err := goModuleDir(ctx, sourceDir)
	if err != nil {
		return err
	}
	if binDir == "" {
		binDir = filepath.Dir(filepath.Clean(out))
	}
	built, err := localcluster.BuildImages(ctx, moduleDir, binDir, out, src)
	if err != nil {
		return fmt.Errorf("node images: %w", err)
	}
	for _, b := range built {
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", b.Ref, b.Digest, b.Archive)
	}
	return nil
}

// goModuleDir is the directory of the go.mod that governs dir.
func goModuleDir(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Dir = dir
	outb, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("find the nephele source tree from %s: go env GOMOD: %w", dir, err)
	}
	gomod := strings.TrimSpace(string(outb))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("--source-dir is not inside the nephele source tree (no go.mod)")
	}
	return filepath.Dir(gomod), nil
}
