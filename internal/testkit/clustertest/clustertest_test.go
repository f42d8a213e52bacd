package clustertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleDir: the images are built from ModuleDir's ./cmd/..., so it must be the root
// of the module, wherever this kit lives in it.
func TestModuleDir(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(ModuleDir(t), "go.mod"))
	if err != nil || !strings.HasPrefix(string(raw), "module github.com/nephele-dev/nephele\n") {
		t.Fatalf("ModuleDir %s holds no nephele go.mod: %v", ModuleDir(t), err)
	}
}
