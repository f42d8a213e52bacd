package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nephele-dev/nephele/internal/atomicfile"
)

// Annotations of the index entry that name the image. containerd's importer takes the
// image name from the first; other OCI tools read the second.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img as an OCI image layout in a tar archive (the format of `ctr
// images import` and `docker load` alike) to path, naming it ref, a full reference such as
// nephele.local/pause:v0.1.0. The file is written under a temporary name and renamed, so
// a reader never sees half an archive. The same image and ref give the same bytes.
func WriteArchive(path, ref string, img v1.Image) error {
	return writeFile(path, func(w io.Writer) error {
		blobs := map[v1.Hash][]byte{}
		desc, err := addImage(blobs, img)
		if err != nil {
			return err
		}
		return writeArchive(w, ref, desc, blobs)
	})
}

// WriteIndexArchive writes idx, a multi-platform image, as WriteArchive writes one
// image: index.json names the image index, whose blobs and whose images' blobs are all in
// the archive. `ctr images import --platform P` imports it and unpacks P's image.
func WriteIndexArchive(path, ref string, idx v1.ImageIndex) error {
	return writeFile(path, func(w io.Writer) error {
		blobs := map[v1.Hash][]byte{}
		im, err := idx.IndexManifest()
		if err != nil {
			return fmt.Errorf("index manifest: %w", err)
		}
		for _, d := range im.Manifests {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return fmt.Errorf("index image %s: %w", d.Digest, err)
			}
			if _, err := addImage(blobs, img); err != nil {
				return err
			}
		}
		raw, err := idx.RawManifest()
		if err != nil {
			return fmt.Errorf("index manifest: %w", err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return fmt.Errorf("index digest: %w", err)
		}
		blobs[digest] = raw
		desc := v1.Descriptor{MediaType: types.OCIImageIndex, Size: int64(len(raw)), Digest: digest}
		return writeArchive(w, ref, desc, blobs)
	})
}

// writeFile writes path through write, whole and durably (atomicfile).
func writeFile(path string, write func(io.Writer) error) error {
	if err := atomicfile.WriteFunc(path, 0o644, write); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	return nil
}

// addImage adds img's manifest, config and layers to blobs and returns the descriptor
// of its manifest, with the platform its config names.
func addImage(blobs map[v1.Hash][]byte, img v1.Image) (v1.Descriptor, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("manifest digest: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("manifest media type: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("config: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("config digest: %w", err)
	}
	blobs[digest] = manifest
	blobs[configName] = config
	layers, err := img.Layers()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("layer digest: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("layer %s: %w", d, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("layer %s: %w", d, err)
		}
		blobs[d] = data
	}
	return v1.Descriptor{
		MediaType: mt,
		Size:      int64(len(manifest)),
		Digest:    digest,
		Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
	}, nil
}

// writeArchive writes the layout: oci-layout, index.json naming root as ref, and every
// blob, in sorted order.
func writeArchive(w io.Writer, ref string, root v1.Descriptor, blobs map[v1.Hash][]byte) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	root.Annotations = map[string]string{
		annotationContainerdName: tag.Name(),
		annotationRefName:        tag.Name(),
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     []v1.Descriptor{root},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}

	tw := tar.NewWriter(w)
	add := func(hdr *tar.Header, data []byte) error {
		hdr.ModTime = epoch
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("archive entry %s: %w", hdr.Name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("archive entry %s: %w", hdr.Name, err)
		}
		return nil
	}
	file := func(name string, data []byte) error {
		return add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, data)
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := add(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}, nil); err != nil {
			return err
		}
	}
	hashes := slices.SortedFunc(maps.Keys(blobs), func(a, b v1.Hash) int { return strings.Compare(a.String(), b.String()) })
	for _, h := range hashes {
		if h.Algorithm != "sha256" {
			return fmt.Errorf("blob %s: only sha256 digests are written", h)
		}
		if err := file("blobs/sha256/"+h.Hex, blobs[h]); err != nil {
			return err
		}
	}
	if err := file("index.json", indexJSON); err != nil {
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	return tw.Close()
}

// ExtractArchive unpacks an archive that WriteArchive or WriteIndexArchive wrote into
// dir, which becomes an OCI image layout that go-containerregistry's layout package
// reads, and returns the reference the archive names its image with and the image's (or
// image index's) descriptor. Only the layout's own files are taken: an entry outside
// blobs/sha256/, index.json and oci-layout, or a link, is refused.
func ExtractArchive(archive, dir string) (ref string, root v1.Descriptor, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", v1.Descriptor{}, fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	var index []byte
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", v1.Descriptor{}, fmt.Errorf("image archive %s: %w", archive, err)
		}
		name := path.Clean(hdr.Name)
		switch {
		case hdr.Typeflag == tar.TypeDir && (name == "blobs" || name == "blobs/sha256"):
			continue
		case hdr.Typeflag != tar.TypeReg:
			return "", v1.Descriptor{}, fmt.Errorf("image archive %s: entry %q is not a regular file", archive, hdr.Name)
		case name != "index.json" && name != "oci-layout" && !isBlobPath(name):
			return "", v1.Descriptor{}, fmt.Errorf("image archive %s: entry %q is not part of an OCI image layout", archive, hdr.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return "", v1.Descriptor{}, fmt.Errorf("image archive %s: entry %s: %w", archive, name, err)
		}
		if name == "index.json" {
			index = data
		}
		out := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", v1.Descriptor{}, fmt.Errorf("image archive %s: %w", archive, err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return "", v1.Descriptor{}, fmt.Errorf("image archive %s: %w", archive, err)
		}
	}
	if index == nil {
		return "", v1.Descriptor{}, fmt.Errorf("image archive %s: no index.json", archive)
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(index, &im); err != nil {
		return "", v1.Descriptor{}, fmt.Errorf("image archive %s: index.json: %w", archive, err)
	}
	if len(im.Manifests) != 1 {
		return "", v1.Descriptor{}, fmt.Errorf("image archive %s: index.json names %d images, want 1", archive, len(im.Manifests))
	}
	root = im.Manifests[0]
	ref = root.Annotations[annotationRefName]
	if ref == "" {
		ref = root.Annotations[annotationContainerdName]
	}
	if ref == "" {
		return "", v1.Descriptor{}, fmt.Errorf("image archive %s: index.json does not name the image (annotation %s)", archive, annotationRefName)
	}
	return ref, root, nil
}

// isBlobPath reports whether name is blobs/sha256/<64 hex digits>.
func isBlobPath(name string) bool {
	hex, ok := strings.CutPrefix(name, "blobs/sha256/")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, r := range hex {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
