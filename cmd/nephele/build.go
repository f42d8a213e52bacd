package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is nephele's module; up builds its commands by import path, which works
// from anywhere inside the source tree.
const modulePath = "github.com/nephele-dev/nephele"

// buildBinaries builds the named commands of this module (cmd/<name>) into binDir. Each
// binary is built aside and renamed into place, so a process running the old one (or a
// concurrent build) never sees a half-written file.
func buildBinaries(ctx context.Context, binDir string, names ...string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go build needs the go command: %w (or run with --build=false and the binaries in %s)", err, binDir)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-o", tmp + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, modulePath+"/cmd/"+n)
	}
	cmd := exec.CommandContext(ctx, goTool, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("go %s: %w\n%s(run up inside the nephele source tree, or make build and --build=false)",
			strings.Join(args, " "), err, out)
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(tmp, n), filepath.Join(binDir, n)); err != nil {
			return err
		}
	}
	return nil
}

// checkExecutable reports a missing or non-executable binary.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s not found", path)
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
