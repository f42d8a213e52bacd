package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// moduleDir is the nephele module root, two levels up from this package.
func moduleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

// TestBuildIsReproducible compiles every in-cluster image for linux/amd64 and
// linux/arm64 twice, into different directories: the digests and archives must be the
// same.
func TestBuildIsReproducible(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	src := Source{URL: "https://github.com/nephele-dev/nephele", Revision: "test", Version: "v0.0.0-test"}
	var runs [2][]Built
	for i := range runs {
		var err error
		runs[i], err = Build(ctx, BuildOptions{ModuleDir: moduleDir(t), OutDir: t.TempDir(), Source: src,
			Platforms: []Platform{LinuxAMD64, LinuxARM64}}, InCluster...)
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range runs[0] {
		other := runs[1][i]
		if b.Digest != other.Digest {
			t.Errorf("%s: digests %s and %s", b.Ref, b.Digest, other.Digest)
		}
		a1, err := os.ReadFile(b.Archive)
		if err != nil {
			t.Fatal(err)
		}
		a2, err := os.ReadFile(other.Archive)
		if err != nil {
			t.Fatal(err)
		}
		if string(a1) != string(a2) {
			t.Errorf("%s: archives differ", b.Ref)
		}
		if len(b.Images) != 2 || b.Images[0].Platform != LinuxAMD64 || b.Images[1].Platform != LinuxARM64 {
			t.Errorf("%s: platform images %+v", b.Ref, b.Images)
		}
		t.Logf("%s %s (%d bytes)", b.Ref, b.Digest, len(a1))
	}
	if runs[0][0].Ref != "nephele.local/pause:v0.0.0-test" {
		t.Errorf("pause ref = %s", runs[0][0].Ref)
	}
	ccm := runs[0][2]
	checkIndexArchive(t, ccm)
}

// checkIndexArchive reads b's archive as an OCI layout and checks that it holds one
// index of two images, each with its platform, the base and the binary, running as
// the nonroot user.
func checkIndexArchive(t *testing.T, b Built) {
	t.Helper()
	files := readTar(t, b.Archive)
	blob := func(h v1.Hash) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+h.Hex]
		if !ok {
			t.Fatalf("blob %s missing", h)
		}
		return data
	}
	top, err := v1.ParseIndexManifest(bytes.NewReader(files["index.json"]))
	if err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %v, %v", top, err)
	}
	if got := top.Manifests[0].Annotations[annotationRefName]; got != b.Ref {
		t.Errorf("ref annotation %q, want %q", got, b.Ref)
	}
	if top.Manifests[0].Digest != b.Digest {
		t.Errorf("index.json names %s, Build said %s", top.Manifests[0].Digest, b.Digest)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(blob(b.Digest)))
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("image index has %d manifests", len(im.Manifests))
	}
	for i, d := range im.Manifests {
		want := b.Images[i]
		if d.Platform == nil || d.Platform.OS != want.Platform.OS || d.Platform.Architecture != want.Platform.Architecture || d.Digest != want.Digest {
			t.Errorf("manifest %d: %s %+v, want %s %s", i, d.Digest, d.Platform, want.Digest, want.Platform)
		}
		m, err := v1.ParseManifest(bytes.NewReader(blob(d.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := v1.ParseConfigFile(bytes.NewReader(blob(m.Config.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != want.Platform.Architecture || cf.Config.User != NonRootUser {
			t.Errorf("%s: architecture %s user %q", want.Platform, cf.Architecture, cf.Config.User)
		}
		if cf.Config.Labels[LabelRevision] != "test" || cf.Config.Labels[LabelVersion] != "v0.0.0-test" || cf.Config.Labels[LabelSource] == "" {
			t.Errorf("%s: labels %v", want.Platform, cf.Config.Labels)
		}
		if len(m.Layers) != 1 {
			t.Fatalf("%s: %d layers", want.Platform, len(m.Layers))
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob(m.Layers[0].Digest)))
		if err != nil {
			t.Fatal(err)
		}
		names := tarNames(t, zr)
		for _, n := range []string{"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", b.Program.Name} {
			if !names[n] {
				t.Errorf("%s: no %s in the layer (%v)", want.Platform, n, names)
			}
		}
		if len(names) != 7 { // etc/, etc/ssl/, etc/ssl/certs/, the three files, the binary
			t.Errorf("%s: layer has %d entries, want 7: %v", want.Platform, len(names), names)
		}
	}
}

// readTar returns the regular files of a tar archive by name.
func readTar(t *testing.T, archive string) map[string][]byte {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = data
	}
}

// tarNames are the entries of a tar stream, directories with their slash.
func tarNames(t *testing.T, r io.Reader) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names[hdr.Name] = true
	}
}

// TestBuildWithHostTools packs a program with the machine's tools (the CSI driver's
// file system tools, on the small pause binary): the tools and their libraries are in the
// layer, PATH finds them, and a platform other than this machine's is refused.
func TestBuildWithHostTools(t *testing.T) {
	host, err := HostPlatform()
	if err != nil {
		t.Fatal(err)
	}
	p := Program{Name: "tools", Package: "./cmd/pause", Title: "tools", HostTools: CSIDriver.HostTools}
	opts := BuildOptions{ModuleDir: moduleDir(t), OutDir: t.TempDir()}
	img, err := buildImage(t.Context(), opts, p, host)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	names := tarNames(t, rc)
	for _, tool := range CSIDriver.HostTools {
		if !names[strings.TrimPrefix(tool.Path, "/")] {
			t.Errorf("the layer lacks %s", tool.Path)
		}
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(names)), func(n string) bool { return strings.Contains(n, "libc.so") }) {
		t.Error("the layer lacks libc: the tools' libraries were not packed")
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cf.Config.Env, hostToolsPath) {
		t.Errorf("env %q lacks %q", cf.Config.Env, hostToolsPath)
	}
	other := LinuxARM64
	if host == LinuxARM64 {
		other = LinuxAMD64
	}
	if _, err := buildImage(t.Context(), opts, p, other); err == nil || !strings.Contains(err.Error(), "carries programs of this machine") {
		t.Errorf("built for %s: %v, want it refused", other, err)
	}
}
