package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func testSpec(data string) Spec {
	return Spec{
		Files:        []File{{Path: "/bin/tool", Data: []byte(data), Mode: 0o755}, {Path: "/etc/tool.conf", Data: []byte("x=1\n"), Mode: 0o644}},
		Entrypoint:   []string{"/bin/tool"},
		Env:          []string{"A=b"},
		User:         "65532:65532",
		ExposedPorts: []string{"8080/tcp"},
		Title:        "tool",
		Source:       Source{URL: "https://example.com/repo", Revision: "abc123", Version: "v1.2.3"},
	}
}

func TestImageIsReproducible(t *testing.T) {
	digests := map[string]v1.Hash{}
	for _, content := range []string{"one", "one", "two"} {
		img, err := Image(testSpec(content))
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := digests[content]; ok && prev != d {
			t.Errorf("two builds of the same spec: %s and %s", prev, d)
		}
		digests[content] = d
	}
	if digests["one"] == digests["two"] {
		t.Errorf("different binaries gave the same digest %s", digests["one"])
	}
}

func TestImageConfig(t *testing.T) {
	img, err := Image(testSpec("bin"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform = %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if !cf.Created.Time.Equal(epoch) {
		t.Errorf("created = %v, want the epoch", cf.Created)
	}
	want := map[string]string{
		LabelSource: "https://example.com/repo", LabelRevision: "abc123", LabelVersion: "v1.2.3", LabelTitle: "tool",
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/bin/tool" {
		t.Errorf("entrypoint = %q", got)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q", cf.Config.User)
	}
	if _, ok := cf.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports = %v", cf.Config.ExposedPorts)
	}
	mt, err := img.MediaType()
	if err != nil || mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type = %q, %v", mt, err)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("entry %s: mtime %v uid %d gid %d", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid)
		}
		names = append(names, hdr.Name)
	}
	wantNames := []string{"bin/", "bin/tool", "etc/", "etc/tool.conf"}
	if len(names) != len(wantNames) {
		t.Fatalf("layer entries = %q, want %q", names, wantNames)
	}
	for i := range names {
		if names[i] != wantNames[i] {
			t.Errorf("layer entries = %q, want %q", names, wantNames)
			break
		}
	}
}

func TestImageRejects(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"no files", Spec{Entrypoint: []string{"/x"}}},
		{"no entrypoint", Spec{Files: []File{{Path: "/x", Data: []byte("x")}}}},
		{"relative path", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "x"}}}},
		{"unclean path", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/a/../x"}}}},
		{"twice", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/x"}, {Path: "/x"}}}},
		{"file then directory", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/a"}, {Path: "/a/b"}}}},
		{"directory then file", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/a/b"}, {Path: "/a"}}}},
		{"link with content", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/a", Link: "b", Data: []byte("x")}}}},
		{"directory with content", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/a", Dir: true, Data: []byte("x")}}}},
		{"file then given directory", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/a"}, {Path: "/a", Dir: true}}}},
		{"link as a parent", Spec{Entrypoint: []string{"/x"}, Files: []File{{Path: "/bin", Link: "usr/bin"}, {Path: "/bin/sh"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Image(tt.spec); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestWriteArchive(t *testing.T) {
	img, err := Image(testSpec("bin"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var sums [2][32]byte
	for i := range sums {
		path := filepath.Join(dir, "img.tar")
		if err := WriteArchive(path, "nephele.local/tool:v1", img); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = sha256.Sum256(data)
		if i == 0 {
			checkLayout(t, data, img)
		}
	}
	if sums[0] != sums[1] {
		t.Error("two archives of the same image differ")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the archive (no temporary file left)", len(entries))
	}
	if err := WriteArchive(filepath.Join(dir, "bad.tar"), "not a ref!", img); err == nil {
		t.Error("bad reference accepted")
	}
}

// checkLayout reads the archive as an OCI layout: every blob the index and manifest
// name is there with the right digest, and the index names the image.
func checkLayout(t *testing.T, archive []byte, img v1.Image) {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
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
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(index.Manifests))
	}
	desc := index.Manifests[0]
	want, _ := img.Digest()
	if desc.Digest != want {
		t.Errorf("index digest %s, want %s", desc.Digest, want)
	}
	if desc.Annotations[annotationContainerdName] != "nephele.local/tool:v1" || desc.Annotations[annotationRefName] != "nephele.local/tool:v1" {
		t.Errorf("index annotations = %v", desc.Annotations)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index platform = %+v", desc.Platform)
	}
	blob := func(h v1.Hash) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+h.Hex]
		if !ok {
			t.Fatalf("blob %s missing", h)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != h.Hex {
			t.Fatalf("blob %s has the wrong content", h)
		}
		return data
	}
	var m v1.Manifest
	if err := json.Unmarshal(blob(desc.Digest), &m); err != nil {
		t.Fatal(err)
	}
	blob(m.Config.Digest)
	for _, l := range m.Layers {
		blob(l.Digest)
	}
}

func TestTag(t *testing.T) {
	tests := map[string]string{
		"v1.2.3":       "v1.2.3",
		"v1.2.3+dirty": "v1.2.3_dirty",
		"-x":           "_-x",
		"dev":          "dev",
		"a/b:c":        "a_b_c",
	}
	for in, want := range tests {
		if got := tag(in); got != want {
			t.Errorf("tag(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Pause.Ref(""); got != "nephele.local/pause:dev" {
		t.Errorf("Pause.Ref(\"\") = %q", got)
	}
}

// TestLayerLinksAndDirectories checks the entries of a symbolic link and of a directory
// given with its mode, which a file under it does not reset.
func TestLayerLinksAndDirectories(t *testing.T) {
	data, err := layerTar([]File{
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/tmp/x", Data: []byte("x"), Mode: 0o644},
		{Path: "/bin/sh", Link: "dash"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = *h
	}
	if h := got["tmp/"]; h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("tmp/: type %c mode %o, want a directory of mode 1777", h.Typeflag, h.Mode)
	}
	if h := got["bin/sh"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "dash" {
		t.Errorf("bin/sh: type %c -> %q, want a link to dash", h.Typeflag, h.Linkname)
	}
	if h := got["bin/"]; h.Typeflag != tar.TypeDir {
		t.Errorf("bin/: type %c, want the parent directory", h.Typeflag)
	}
}
