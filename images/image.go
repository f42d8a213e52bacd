package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI label keys every image carries (OCI image spec, annotations.md).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelTitle    = "org.opencontainers.image.title"
)

// Default platform of an image: nephele's nodes run on the machine that builds them.
const (
	OS           = "linux"
	Architecture = "amd64"
)

// epoch is the timestamp of every tar entry and of the image config: fixed, so builds
// are reproducible.
var epoch = time.Unix(0, 0).UTC()

// Source says where an image's code comes from; it becomes the OCI labels.
type Source struct {
	// URL is the repository, e.g. https://github.com/nephele-dev/nephele.
	URL string
	// Revision is the commit the binaries were built from.
	Revision string
	// Version is the version of the code, also the tag of the image references Build
	// makes.
	Version string
}

// File is one entry of an image's single layer: a regular file, or with Link a
// symbolic link, or with Dir a directory (one with no file in it, such as /tmp; parent
// directories of files are added by themselves).
type File struct {
	// Path is the absolute path in the image, e.g. /pause.
	Path string
	// Data is the content of a regular file.
	Data []byte
	// Mode is the permission bits, e.g. 0o755.
	Mode int64
	// Link, when set, makes the entry a symbolic link to Link, e.g. /bin/sh -> dash.
	Link string
	// Dir makes the entry a directory, with Mode (0o755 when zero).
	Dir bool
}

// Spec describes a single-layer image.
type Spec struct {
	// Files are the layer's files; parent directories are added.
	Files []File
	// Entrypoint is the command the container runs.
	Entrypoint []string
	// Cmd are the entrypoint's default arguments, which a pod's args replace.
	Cmd []string
	// Env is the environment, as KEY=value.
	Env []string
	// User, when set, is the uid[:gid] the container runs as.
	User string
	// ExposedPorts are documentation of the ports served, e.g. 8080/tcp.
	ExposedPorts []string
	// Title is the org.opencontainers.image.title label.
	Title string
	// Source gives the source, revision and version labels.
	Source Source
	// Platform is the platform of the files; zero means LinuxAMD64.
	Platform Platform
}

// Image builds the image s describes: one layer, OCI media types, s.Platform, labels
// from s.Source. The result depends on s only.
func Image(s Spec) (v1.Image, error) {
	if len(s.Files) == 0 {
		return nil, errors.New("image spec has no files")
	}
	if len(s.Entrypoint) == 0 {
		return nil, errors.New("image spec has no entrypoint")
	}
	layerTar, err := layerTar(s.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("build layer: %w", err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "nephele images", Comment: s.Title},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, fmt.Errorf("add layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	platform := s.Platform
	if platform == (Platform{}) {
		platform = LinuxAMD64
	}
	cf.OS = platform.OS
	cf.Architecture = platform.Architecture
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = slices.Clone(s.Entrypoint)
	cf.Config.Cmd = slices.Clone(s.Cmd)
	cf.Config.Env = slices.Clone(s.Env)
	cf.Config.User = s.User
	cf.Config.Labels = labels(s)
	if len(s.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.ExposedPorts {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// labels returns the OCI labels of s, leaving out the empty ones.
func labels(s Spec) map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{
		LabelSource:   s.Source.URL,
		LabelRevision: s.Source.Revision,
		LabelVersion:  s.Source.Version,
		LabelTitle:    s.Title,
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// layerTar writes files, and every parent directory they need, as a tar stream with
// sorted entries, root ownership and epoch timestamps.
func layerTar(files []File) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	entries := map[string]entry{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("image file path %q must be absolute and clean", f.Path)
		}
		name := strings.TrimPrefix(f.Path, "/")
		if _, dup := entries[name]; dup {
			return nil, fmt.Errorf("image file %s given twice", f.Path)
		}
		if _, isDir := entries[name+"/"]; isDir && !f.Dir {
			return nil, fmt.Errorf("image path %s is both a file and a directory", f.Path)
		}
		if f.Dir {
			if _, isFile := entries[name]; isFile {
				return nil, fmt.Errorf("image path %s is both a file and a directory", f.Path)
			}
		}
		switch {
		case f.Dir && (f.Link != "" || len(f.Data) > 0):
			return nil, fmt.Errorf("image directory %s has content or a link target", f.Path)
		case f.Dir:
			mode := f.Mode
			if mode == 0 {
				mode = 0o755
			}
			entries[name+"/"] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}}
		case f.Link != "":
			if len(f.Data) > 0 {
				return nil, fmt.Errorf("image symbolic link %s has content", f.Path)
			}
			entries[name] = entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Link, Mode: 0o777}}
		default:
			entries[name] = entry{
				hdr:  tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: f.Mode, Size: int64(len(f.Data))},
				data: f.Data,
			}
		}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, isFile := entries[dir]; isFile {
				return nil, fmt.Errorf("image path /%s is both a file and a directory", dir)
			}
			if _, given := entries[dir+"/"]; !given { // keep a mode File.Dir gave
				entries[dir+"/"] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}}
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		e.hdr.ModTime = epoch
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("write layer entry %s: %w", name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("write layer entry %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// ReadFile is a File read from disk, for a binary built beforehand.
func ReadFile(imagePath, diskPath string, mode int64) (File, error) {
	data, err := os.ReadFile(diskPath)
	if err != nil {
		return File{}, fmt.Errorf("read %s for image path %s: %w", diskPath, imagePath, err)
	}
	return File{Path: imagePath, Data: data, Mode: mode}, nil
}
