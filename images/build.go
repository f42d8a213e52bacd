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
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
		User: NonRootUser, Ports: []string{"8080/tcp"}}
	// CloudControllerManager is nephele's cloud-controller-manager with the local
	// provider built in; it runs as the nonroot user and serves 10258 (HTTPS: health
	// and metrics).
	CloudControllerManager = Program{Name: "cloud-controller-manager", Package: "./cmd/cloud-controller-manager",
		Title: "nephele cloud-controller-manager", User: NonRootUser, Ports: []string{"10258/tcp"}}
	// CSIDriver is nephele's CSI driver with the local provider built in, in both
	// modes. It runs as root: the node plugin formats, mounts and resizes file systems
	// with the machine's tools (mount-utils runs mount, umount, blkid, blockdev, mkfs,
	// fsck, dumpe2fs, resize2fs and xfs_growfs; the driver e2fsck), which the image
	// carries. (No fsck.xfs: fsck of an XFS is a no-op, its log replays at mount.)
	CSIDriver = Program{Name: "csi-driver", Package: "./cmd/csi-driver", Title: "nephele csi-driver",
		HostTools: []HostTool{
			{Path: "/usr/bin/mount", Name: "mount", Package: "mount"},
			{Path: "/usr/bin/umount", Name: "umount", Package: "mount"},
			{Path: "/usr/sbin/blkid", Name: "blkid", Package: "util-linux"},
			{Path: "/usr/sbin/blockdev", Name: "blockdev", Package: "util-linux"},
			{Path: "/usr/sbin/fsck", Name: "fsck", Package: "util-linux"},
			{Path: "/usr/sbin/mkfs.ext4", Name: "mkfs.ext4", Package: "e2fsprogs"},
			{Path: "/usr/sbin/fsck.ext4", Name: "fsck.ext4", Package: "e2fsprogs"},
			{Path: "/usr/sbin/e2fsck", Name: "e2fsck", Package: "e2fsprogs"},
			{Path: "/usr/sbin/dumpe2fs", Name: "dumpe2fs", Package: "e2fsprogs"},
			{Path: "/usr/sbin/resize2fs", Name: "resize2fs", Package: "e2fsprogs"},
			{Path: "/usr/sbin/mkfs.xfs", Name: "mkfs.xfs", Package: "xfsprogs"},
			{Path: "/usr/sbin/xfs_growfs", Name: "xfs_growfs", Package: "xfsprogs"},
		}}
	// Operator is nephele-operator, which manages the cloud-controller-manager; it runs
	// as the nonroot user and serves 10270 (HTTPS: health and metrics).
	Operator = Program{Name: "nephele-operator", Package: "./cmd/nephele-operator",
		Title: "nephele-operator", User: NonRootUser, Ports: []string{"10270/tcp"}}
)

// InCluster are the images of every nephele binary meant to run in a cluster, the set
// `nephele images` and `make images` build.
var InCluster = []Program{Pause, DemoHTTP, CloudControllerManager, Operator}

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
	// HostTools are programs of this machine the image carries beside the binary, with
	// their shared libraries (PackHostTools), such as the file system tools a CSI node
	// plugin runs. They are this machine's, so such an image is built for its platform
	// only (HostPlatform); PATH is set to find them.
	HostTools []HostTool
}

// hostToolsPath is the PATH of an image with host tools.
const hostToolsPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Ref is the image reference of p at version, e.g. nephele.local/pause:dev.
func (p Program) Ref(version string) string { return p.RefIn(Registry, version) }

// RefIn is the image reference of p at version under repository prefix registry, e.g.
// registry.example.com/team/cloud-provider-example:v0.1.0.
func (p Program) RefIn(registry, version string) string {
	if version == "" {
		version = DefaultVersion
	}
	return registry + "/" + p.Name + ":" + tag(version)
}

// Spec is p's image spec: the base (BaseFiles) and binary at /Name, for platform.
func (p Program) Spec(binary []byte, src Source, platform Platform) (Spec, error) {
	base, err := BaseFiles()
	if err != nil {
		return Spec{}, err
	}
	return Spec{
		Files:        append(base, File{Path: "/" + p.Name, Data: binary, Mode: 0o755}),
		Entrypoint:   []string{"/" + p.Name},
		User:         p.User,
		ExposedPorts: p.Ports,
		Title:        p.Title,
		Source:       src,
		Platform:     platform,
	}, nil
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
	// OutDir receives one archive per image, <name>.tar, and the binaries,
	// <os>-<arch>/<name>.
	OutDir string
	// Platforms are the platforms of every image; empty means LinuxAMD64 only. With one
	// platform an archive holds that image; with several, an OCI image index of them.
	Platforms []Platform
	// Source gives the labels; Source.Version (DefaultVersion when empty) is the tag.
	Source Source
	// Registry is the repository prefix of the references, Registry when empty.
	Registry string
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
	// Digest is what Ref resolves to: the image manifest's digest with one platform,
	// the image index's with several.
	Digest v1.Hash
	// Images are the digest of each platform's image manifest, in BuildOptions order.
	Images []PlatformImage
}

// PlatformImage is one platform's image of a Built.
type PlatformImage struct {
	// Platform is the image's platform.
	Platform Platform
	// Digest is its manifest's digest.
	Digest v1.Hash
}

// Build compiles each program as a static binary for each platform (cgo off,
// -trimpath, no build ID or VCS stamp, so the bytes depend on the source and toolchain
// only), packs it into its image on the base (BaseFiles) and writes the archive to
// opts.OutDir.
func Build(ctx context.Context, opts BuildOptions, programs ...Program) ([]Built, error) {
	if opts.ModuleDir == "" || opts.OutDir == "" {
		return nil, errors.New("build images: ModuleDir and OutDir are required")
	}
	platforms := opts.Platforms
	if len(platforms) == 0 {
		platforms = []Platform{LinuxAMD64}
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	built := make([]Built, 0, len(programs))
	for _, p := range programs {
		registry := opts.Registry
		if registry == "" {
			registry = Registry
		}
		b := Built{Program: p, Ref: p.RefIn(registry, opts.Source.Version), Archive: filepath.Join(opts.OutDir, p.Name+".tar")}
		var imgs []v1.Image
		for _, platform := range platforms {
			img, err := buildImage(ctx, opts, p, platform)
			if err != nil {
				return nil, fmt.Errorf("build image %s for %s: %w", p.Name, platform, err)
			}
			digest, err := img.Digest()
			if err != nil {
				return nil, fmt.Errorf("build image %s for %s: %w", p.Name, platform, err)
			}
			imgs = append(imgs, img)
			b.Images = append(b.Images, PlatformImage{Platform: platform, Digest: digest})
		}
		if len(imgs) == 1 {
			b.Digest = b.Images[0].Digest
			if err := WriteArchive(b.Archive, b.Ref, imgs[0]); err != nil {
				return nil, err
			}
		} else {
			idx, err := Index(imgs...)
			if err != nil {
				return nil, fmt.Errorf("build image %s: %w", p.Name, err)
			}
			if b.Digest, err = idx.Digest(); err != nil {
				return nil, fmt.Errorf("build image %s: %w", p.Name, err)
			}
			if err := WriteIndexArchive(b.Archive, b.Ref, idx); err != nil {
				return nil, err
			}
		}
		built = append(built, b)
	}
	return built, nil
}

// buildImage compiles p for platform into OutDir/<os>-<arch>/<name> and packs it.
func buildImage(ctx context.Context, opts BuildOptions, p Program, platform Platform) (v1.Image, error) {
	if len(p.HostTools) > 0 {
		host, err := HostPlatform()
		if err != nil {
			return nil, err
		}
		if platform != host {
			return nil, fmt.Errorf("it carries programs of this machine (%s), which is %s", p.HostTools[0].Path, host)
		}
	}
	bin := filepath.Join(opts.OutDir, platform.OS+"-"+platform.Architecture, p.Name)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return nil, err
	}
	if err := Compile(ctx, opts.Go, opts.ModuleDir, p.Package, bin, platform); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	spec, err := p.Spec(data, opts.Source, platform)
	if err != nil {
		return nil, err
	}
	if len(p.HostTools) > 0 {
		tools, err := PackHostTools(ctx, p.HostTools)
		if err != nil {
			return nil, err
		}
		spec.Files = append(spec.Files, tools...)
		spec.Env = append(spec.Env, hostToolsPath)
	}
	return Image(spec)
}

// Index is the OCI image index of imgs, one entry per image with the platform its
// config names, in the order given. The same images give the same index digest.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image index: %w", err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: Platform{OS: cf.OS, Architecture: cf.Architecture}.oci(),
		}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// Compile builds the Go command pkg of the module in moduleDir into out for platform,
// static and reproducible (see Build). goCmd is the go command, "go" when empty.
func Compile(ctx context.Context, goCmd, moduleDir, pkg, out string, platform Platform) error {
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
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("compile %s: %w: %s", pkg, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
