package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// BinDirEnv names the environment variable that overrides where the control plane binaries
// are looked up. Without it they come from the bin/ directory of the nephele module root.
const BinDirEnv = "NEPHELE_BIN_DIR"

// modulePath is the module whose root holds bin/. Tests run in package directories below
// it; nephele up and the benchmarks are run from inside the source tree.
const modulePath = "github.com/nephele-dev/nephele"

// Names of the binaries `make tools` puts into bin/.
const (
	etcdBinary              = "etcd"
	apiserverBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
	schedulerBinary         = "kube-scheduler"
	kwokBinary              = "kwok"
	kwokStagesDir           = "kwok-stages"
)

// ControllerManagerV135 is the kube-controller-manager v1.35 build `make tools` adds for
// leader-migration interop: v1.36 exits as soon as it takes a migration lease (it
// registers the informer name "kube-controller-manager" twice), so tests of the handover
// from kube-controller-manager to a cloud-controller-manager use v1.35.
const ControllerManagerV135 = "kube-controller-manager-v1.35"

// MissingBinaryError reports that a binary (or kwok stage file) the control plane needs is
// not in the bin directory. Tests must fail on it rather than skip, so CI never passes
// without having run the integration tests.
type MissingBinaryError struct {
	// Path is the file that was looked for.
	Path string
	// Err is the underlying cause, such as fs.ErrNotExist or a permission problem.
	Err error
}

func (e *MissingBinaryError) Error() string {
	if errors.Is(e.Err, fs.ErrNotExist) {
		return fmt.Sprintf("%s not found: run make tools", e.Path)
	}
	return fmt.Sprintf("%s not usable (%v): run make tools", e.Path, e.Err)
}

func (e *MissingBinaryError) Unwrap() error { return e.Err }

// BinDir returns the directory holding the control plane binaries: $NEPHELE_BIN_DIR when
// set, else bin/ in the nephele module root found by walking up from the working directory.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find bin directory: %w", err)
	}
	root, err := moduleRoot(wd, modulePath)
	if err != nil {
		return "", fmt.Errorf("find bin directory (set %s to override): %w", BinDirEnv, err)
	}
	return filepath.Join(root, "bin"), nil
}

// moduleRoot walks up from dir to the directory whose go.mod declares module path. Other
// go.mod files on the way (nested modules such as hack/tools) are passed over.
func moduleRoot(dir, path string) (string, error) {
	for d := dir; ; {
		name, err := moduleName(filepath.Join(d, "go.mod"))
		switch {
		case err == nil && name == path:
			return d, nil
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod for module %s in %s or its parents", path, dir)
		}
		d = parent
	}
}

// moduleName returns the module path declared in a go.mod file.
func moduleName(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest, _, _ = strings.Cut(rest, "//")
		rest = strings.TrimSpace(rest)
		if unq, err := strconv.Unquote(rest); err == nil {
			rest = unq
		}
		return rest, nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", gomod, err)
	}
	return "", fmt.Errorf("%s has no module line", gomod)
}

// binary returns the path of an executable in the bin directory.
func binary(binDir, name string) (string, error) {
	p := filepath.Join(binDir, name)
	fi, err := os.Stat(p)
	if err != nil {
		return "", &MissingBinaryError{Path: p, Err: unwrapPathError(err)}
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", &MissingBinaryError{Path: p, Err: errors.New("not an executable file")}
	}
	return p, nil
}

// kwokStages returns the stage files kwok needs so Nodes turn Ready and heartbeat; kwok
// refuses to start without any.
func kwokStages(binDir string) ([]string, error) {
	dir := filepath.Join(binDir, kwokStagesDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list kwok stages in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, &MissingBinaryError{Path: filepath.Join(dir, "*.yaml"), Err: fs.ErrNotExist}
	}
	sort.Strings(files)
	return files, nil
}

// checkBinaries fails early, before anything starts, when a binary opts needs is missing.
func checkBinaries(binDir string, opts Options) error {
	names := []string{etcdBinary, apiserverBinary}
	if opts.ControllerManager {
		names = append(names, controllerManagerBinary)
	}
	if opts.Scheduler {
		names = append(names, schedulerBinary)
	}
	if opts.Kwok {
		names = append(names, kwokBinary)
	}
	var errs []error
	for _, n := range names {
		if _, err := binary(binDir, n); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.Kwok {
		if _, err := kwokStages(binDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unwrapPathError drops the *fs.PathError wrapper whose path MissingBinaryError already names.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
