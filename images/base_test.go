package images

import (
	"crypto/x509"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestBaseFiles(t *testing.T) {
	files, err := BaseFiles()
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]string{}
	for _, f := range files {
		byPath[f.Path] = string(f.Data)
	}
	if !strings.Contains(byPath["/etc/passwd"], "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd = %q", byPath["/etc/passwd"])
	}
	if !strings.Contains(byPath["/etc/group"], "nonroot:x:65532:") {
		t.Errorf("/etc/group = %q", byPath["/etc/group"])
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(byPath[CACertificatesPath])) {
		t.Fatalf("%s holds no certificate", CACertificatesPath)
	}
	if n := strings.Count(byPath[CACertificatesPath], "BEGIN CERTIFICATE"); n < 100 {
		t.Errorf("%s holds %d certificates, want the whole root store (100+)", CACertificatesPath, n)
	}
	again, err := BaseFiles()
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if string(files[i].Data) != string(again[i].Data) {
			t.Errorf("%s differs between two calls", files[i].Path)
		}
	}
}

func TestParsePlatforms(t *testing.T) {
	tests := []struct {
		in      string
		want    []Platform
		wantErr string
	}{
		{in: "linux/amd64", want: []Platform{LinuxAMD64}},
		{in: "linux/amd64,linux/arm64", want: []Platform{LinuxAMD64, LinuxARM64}},
		{in: " linux/arm64 ", want: []Platform{LinuxARM64}},
		{in: "linux/amd64,linux/amd64", wantErr: "listed twice"},
		{in: "windows/amd64", wantErr: `platform "windows/amd64": want one of linux/amd64, linux/arm64`},
		{in: "", wantErr: `platform ""`},
	}
	for _, tt := range tests {
		got, err := ParsePlatforms(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePlatforms(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ParsePlatforms(%q) = %v, %v", tt.in, got, err)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParsePlatforms(%q) = %v, want %v", tt.in, got, tt.want)
			}
		}
	}
}

func TestIndex(t *testing.T) {
	amd := testSpec("bin")
	arm := testSpec("bin")
	arm.Platform = LinuxARM64
	var digests [2]v1.Hash
	for i := range digests {
		a, err := Image(amd)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Image(arm)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := Index(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if digests[i], err = idx.Digest(); err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
			t.Errorf("index manifests %+v", im.Manifests)
		}
		if mt, _ := idx.MediaType(); mt != "application/vnd.oci.image.index.v1+json" {
			t.Errorf("index media type %s", mt)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("two indexes of the same images: %s and %s", digests[0], digests[1])
	}
}
