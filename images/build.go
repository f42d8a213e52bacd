package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Registry is the registry host of nephele's image references. Nothing serves it yet:
// nodes get the images by import, and a later registry can be mapped to this name with
// containerd's hosts directory (config_path) without renaming the images.
const Registry = "nephele.local"

// DefaultVersion is the version, and tag, of images built without one.
const DefaultVersion = "dev"

// nephele's images: the name under Registry, the command it packs, and its settings.
var (
	// Pause is the pod sandbox image (containerd's sandbox_image).
	Pause = Program{Name: "pause", Package: "./cmd/pause", Title: "nephele pause"}
	// DemoHTTP is the demo HTTP server; it runs as an unprivileged user and serves 8080.
	DemoHTTP = Program{Name: "demo-http", Package: "./cmd/demo-http", Title: "nephele demo-http",
		User: "65532:65532", Ports: []string{"8080/tcp"}}
)

// Program is an image made of one static Go command of this module.
type Program struct {
	// Name is the image name under Registry and the binary's name in the image (/Name).
	Name string
	// Package is the command's package, relative to the module root.
	Package string
	// Title is the org.opencontainers.image.title label.
	Title string
	// User is the uid:gid the container runs as; empty runs as root.
	User string
	// Ports are the ports the program serves, e.g. 8080/tcp.
	Ports []string
}

// Ref is the image reference of p at version, e.g. nephele.local/pause:dev.
func (p Program) Ref(version string) string {
	if version == "" {
		version = DefaultVersion
	}
	return Registry + "/" + p.Name + ":" + tag(version)
}

// Spec is p's image spec with binary as its only file.
func (p Program) Spec(binary []byte, src Source) Spec {
	return Spec{
		Files:        []File{{Path: "/" + p.Name, Data: binary, Mode: 0o755}},
		Entrypoint:   []string{"/" + p.Name},
		User:         p.User,
		ExposedPorts: p.Ports,
		Title:        p.Title,
		Source:       src,
	}
}

// invalidTagChars are the characters a tag may not hold (distribution's reference grammar).
var invalidTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// tag turns a version such as v1.2.3+dirty into a valid tag (v1.2.3_dirty).
func tag(version string) string {
	t := invalidTagChars.ReplaceAllString(version, "_")
	if t[0] == '.' || t[0] == '-' {
		t = "_" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// BuildOptions says where Build finds the source and puts the archives.
type BuildOptions struct {
	// ModuleDir is the root of the nephele module (the directory of its go.mod).
	ModuleDir string
	// OutDir receives one archive per image, <name>.tar, and the binaries, <name>.
	OutDir string
	// Source gives the labels; Source.Version (DefaultVersion when empty) is the tag.
	Source Source
	// Go is the go command; "go" when empty.
	Go string
}

// Built is an image Build wrote.
type Built struct {
	// Program is what was built.
	Program Program
	// Ref is the image reference the archive names.
	Ref string
	// Archive is the path of the OCI archive.
	Archive string
	// Digest is the image manifest's digest.
	Digest v1.Hash
}

// Build compiles each program as a static linux/amd64 binary (cgo off, -trimpath, no
// build ID or VCS stamp, so the bytes depend on the source and toolchain only), packs it
// into its image and writes the archive to opts.OutDir.
func Build(ctx context.Context, opts BuildOptions, programs ...Program) ([]Built, error) {
	if opts.ModuleDir == "" || opts.OutDir == "" {
		return nil, errors.New("build images: ModuleDir and OutDir are required")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	built := make([]Built, 0, len(programs))
	for _, p := range programs {
		bin := filepath.Join(opts.OutDir, p.Name)
		if err := Compile(ctx, opts.Go, opts.ModuleDir, p.Package, bin); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("build image %s: %w", p.Name, err)
		}
		img, err := Image(p.Spec(data, opts.Source))
		if err != nil {
			return nil, fmt.Errorf("build image %s: %w", p.Name, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("build image %s: %w", p.Name, err)
		}
		b := Built{Program: p, Ref: p.Ref(opts.Source.Version), Archive: filepath.Join(opts.OutDir, p.Name+".tar"), Digest: digest}
		if err := WriteArchive(b.Archive, b.Ref, img); err != nil {
			return nil, err
		}
		built = append(built, b)
	}
	return built, nil
}

// Compile builds the Go command pkg of the module in moduleDir into out, static and
// reproducible (see Build). goCmd is the go command, "go" when empty.
func Compile(ctx context.Context, goCmd, moduleDir, pkg, out string) error {
	if goCmd == "" {
		goCmd = "go"
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("compile %s: %w", pkg, err)
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -buildid=", "-o", abs, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+OS, "GOARCH="+Architecture, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("compile %s: %w: %s", pkg, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
