package kubenode

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/testlog"
)

// TestImportImageForTheNodesPlatform: images are imported for the node's platform
// (linux and the machine's GOARCH), and a failed import says which platform it wanted.
func TestImportImageForTheNodesPlatform(t *testing.T) {
	if got, want := newRunner(&Node{}, testlog.New(t, 0)).ctr.platform, "linux/"+runtime.GOARCH; got != want {
		t.Errorf("the runtime imports images for %s, want %s", got, want)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "ctr")
	script := "#!/bin/sh\necho \"ctr: no match for platform in manifest\" >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := ctr{path: fake, address: filepath.Join(dir, "sock"), platform: "linux/riscv64"}
	err := c.importImage(t.Context(), "pause.tar")
	if err == nil || !strings.Contains(err.Error(), "--platform linux/riscv64 pause.tar") || !strings.Contains(err.Error(), "linux/riscv64 image") || !strings.Contains(err.Error(), "GOARCH") {
		t.Errorf("importImage = %v, want an error naming the platform it imported for", err)
	}
}
