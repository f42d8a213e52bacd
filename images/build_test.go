package images

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// TestBuildIsReproducible compiles nephele's images twice into different directories:
// the digests and archives must be the same.
func TestBuildIsReproducible(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	src := Source{URL: "https://github.com/nephele-dev/nephele", Revision: "test", Version: "v0.0.0-test"}
	var runs [2][]Built
	for i := range runs {
		var err error
		runs[i], err = Build(ctx, BuildOptions{ModuleDir: moduleDir(t), OutDir: t.TempDir(), Source: src}, Pause, DemoHTTP)
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
		t.Logf("%s %s (%d bytes)", b.Ref, b.Digest, len(a1))
	}
	if runs[0][0].Ref != "nephele.local/pause:v0.0.0-test" {
		t.Errorf("pause ref = %s", runs[0][0].Ref)
	}
}
