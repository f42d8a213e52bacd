package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/images"
)

// newImagesCommand returns `nephele images`: reproducible OCI images of nephele's
// in-cluster binaries, or of any Go command of any module (a provider's own
// cloud-controller-manager).
func newImagesCommand() *cobra.Command {
	var out, sourceDir, platforms, registry string
	var programs []string
	src := images.Source{URL: "https://github.com/nephele-dev/nephele", Version: images.DefaultVersion}
	cmd := &cobra.Command{
		Use:   "images --out DIR",
		Short: "Build reproducible OCI images of nephele's in-cluster binaries, or of a provider's",
		Long: `images compiles Go commands as static binaries (cgo off, -trimpath, no build ID) for each
platform and packs each into a reproducible OCI image on a minimal base (CA certificates, a
nonroot user, nothing else), written to DIR/<name>.tar: an OCI layout in a tar archive, of
one image or, with several platforms, of an image index. It prints each image's reference
and digest. The same commit gives the same digests.

Without --program it builds nephele's in-cluster images (pause, demo-http,
cloud-controller-manager) from the nephele tree at --source-dir. With --program
NAME=PACKAGE (repeatable) it builds those commands of the module at --source-dir instead,
so a provider ships its cloud-controller-manager the same way:

  nephele images --source-dir . --program cloud-provider-example=./cmd/cloud-controller-manager \
      --registry registry.example.com/example --version v0.1.0 --out bin/images`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := images.ParsePlatforms(platforms)
			if err != nil {
				return fmt.Errorf("invalid value for --platforms: %w", err)
			}
			progs, err := parsePrograms(programs)
			if err != nil {
				return err
			}
			opts := images.BuildOptions{OutDir: out, Source: src, Platforms: ps, Registry: registry}
			return runImages(cmd.Context(), cmd.OutOrStdout(), sourceDir, opts, progs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the archives to (required)")
	f.StringVar(&sourceDir, "source-dir", ".", "the module to build from (the directory of its go.mod, or below it)")
	f.StringVar(&platforms, "platforms", images.LinuxAMD64.String(), "comma-separated platforms: linux/amd64, linux/arm64")
	f.StringArrayVar(&programs, "program", nil, "NAME=PACKAGE: build the command PACKAGE (./cmd/x) of --source-dir as image NAME, running as the nonroot user; repeatable")
	f.StringVar(&registry, "registry", images.Registry, "repository prefix of the image references: REGISTRY/NAME:VERSION")
	f.StringVar(&src.Version, "version", src.Version, "version label, and tag, of the images")
	f.StringVar(&src.Revision, "revision", "", "revision label of the images (the commit they are built from)")
	f.StringVar(&src.URL, "source", src.URL, "source label of the images (the repository)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// parsePrograms turns --program NAME=PACKAGE values into programs.
func parsePrograms(values []string) ([]images.Program, error) {
	var progs []images.Program
	for _, v := range values {
		name, pkg, ok := strings.Cut(v, "=")
		if !ok || name == "" || !strings.HasPrefix(pkg, "./") {
			return nil, fmt.Errorf("invalid value for --program: %q: want NAME=./path/to/command", v)
		}
		progs = append(progs, images.Program{Name: name, Package: pkg, Title: name, User: images.NonRootUser})
	}
	return progs, nil
}

func runImages(ctx context.Context, stdout io.Writer, sourceDir string, opts images.BuildOptions, progs []images.Program) error {
	moduleDir, err := goModuleDir(ctx, sourceDir)
	if err != nil {
		return err
	}
	opts.ModuleDir = moduleDir
	if len(progs) == 0 {
		progs = images.InCluster
	}
	built, err := images.Build(ctx, opts, progs...)
	if err != nil {
		return err
	}
	for _, b := range built {
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", b.Ref, b.Digest, b.Archive)
	}
	return nil
}
