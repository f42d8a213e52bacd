package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nephele-dev/nephele/images"
)

// modulePath is nephele's module: its commands are built by import path, which works
// from anywhere inside the source tree.
const modulePath = "github.com/nephele-dev/nephele"

// built are the commands of nephele the cluster runs: BuiltBinaries, or for kwok nodes
// the two of them that run outside any node.
func (c *Config) built() []string {
	if c.NodeMode == NodesKwok {
		return kwokBuiltBinaries
	}
	return BuiltBinaries
}

// build builds the commands the cluster runs and, for real nodes, the image archives
// its registry serves, into BinDir from the source tree in BuildFrom.
func (c *Cluster) build(ctx context.Context) (string, error) {
	if err := BuildCommands(ctx, c.cfg.BuildFrom, c.cfg.BinDir, c.cfg.built()...); err != nil {
		return "", err
	}
	if c.cfg.NodeMode == NodesKwok {
		return "into " + c.cfg.BinDir, nil
	}
	out, err := BuildImages(ctx, c.cfg.BuildFrom, c.cfg.BinDir, ImageDir(c.cfg.BinDir), images.Source{Version: images.DefaultVersion})
	if err != nil {
		return "", err
	}
	refs := make([]string, len(out))
	for i, b := range out {
		refs[i] = b.Ref
	}
	return "into " + c.cfg.BinDir + "; images " + strings.Join(refs, ", "), nil
}

// BuildCommands builds the named commands of nephele's module (cmd/<name>) from the
// source tree at moduleDir into binDir. Each binary is built aside and renamed into
// place, so a process running the old one (or a concurrent build) never sees a
// half-written file.
func BuildCommands(ctx context.Context, moduleDir, binDir string, names ...string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building nephele's commands needs the go command: %w (or put them in %s with make build)", err, binDir)
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
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), moduleDir, err, out)
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(tmp, n), filepath.Join(binDir, n)); err != nil {
			return err
		}
	}
	return nil
}
