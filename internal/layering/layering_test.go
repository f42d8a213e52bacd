package layering

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is nephele's module path.
const module = "github.com/nephele-dev/nephele"

// layers are docs/architecture.md's, lowest first: a package may import packages of its
// own layer and of the layers before it. Each is a list of path prefixes below module;
// the longest prefix of a package decides its layer.
var layers = []struct {
	name     string
	prefixes []string
}{
	{"libraries", []string{"internal/atomicfile", "internal/cgroupfs", "internal/logcap", "internal/mountinfo",
		"internal/nsrun", "internal/pki", "internal/procstat", "internal/promreg", "internal/waitfor", "internal/nodeagent", "internal/securedir", "internal/smallfile"}},
	{"contract", []string{"cloud"}},
	{"runtime", []string{"manager"}},
	{"controllers", []string{"controllers", "csi"}},
	{"clouds", []string{"localcloud", "providers"}},
	{"machine", []string{"controlplane", "images", "kubenode"}},
	{"shipping", []string{"deploy", "operator"}},
	{"tooling", []string{"handover", "localcluster"}},
	{"commands", []string{"cmd"}},
}

// forbidden are imports the layers allow but the design does not: between siblings of one
// layer that would make two folders import each other (the operator builds on
// deploy/render, never the other way round), and from the controllers into the manager's
// cloud call path, which is the manager's runtime and not the contract: what a controller
// says to it (a call's class) and hears from it (a fenced call) is in package cloud.
var forbidden = [][2]string{{"deploy", "operator"}, {"controllers", "manager/instrumented"}}

// kits are the packages only tests may import (and each other): internal/testkit, and
// cloud/cloudtest, the conformance suite's go test front end (which imports testing).
var kits = []string{"internal/testkit", "cloud/cloudtest", "internal/layering"}

// binaries are the commands users run, which must not link the testing package.
var binaries = []string{"cmd/nephele", "cmd/cloud-controller-manager", "cmd/csi-driver"}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestLayers(t *testing.T) {
	for _, p := range listPackages(t, "-e", "./...") {
		rel, ok := below(p.ImportPath)
		if !ok || under(rel, kits...) {
			continue
		}
		from, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s is in no layer of docs/architecture.md: add it to the table and to this test", rel)
			continue
		}
		for _, imp := range p.Imports {
			if imp == "testing" {
				t.Errorf("%s imports the testing package: only _test.go files and test kits (%s) may", rel, strings.Join(kits, ", "))
			}
			irel, ok := below(imp)
			if !ok {
				continue
			}
			if under(irel, kits...) {
				t.Errorf("%s imports the test kit %s: only _test.go files and other kits may", rel, irel)
				continue
			}
			to, ok := layerOf(irel)
			if ok && to > from {
				t.Errorf("%s (layer %s) imports %s (layer %s), a higher layer", rel, layers[from].name, irel, layers[to].name)
			}
			for _, f := range forbidden {
				if under(rel, f[0]) && under(irel, f[1]) {
					t.Errorf("%s imports %s: %s/ may not import %s/", rel, irel, f[0], f[1])
				}
			}
		}
	}
}

func TestBinariesLinkNoTestingPackage(t *testing.T) {
	args := []string{"-deps"}
	for _, b := range binaries {
		args = append(args, module+"/"+b)
	}
	for _, p := range listPackages(t, args...) {
		for _, imp := range p.Imports {
			if imp == "testing" {
				t.Errorf("%s imports the testing package and %s link it", p.ImportPath, strings.Join(binaries, " and "))
			}
		}
	}
}

// statSources stats every Go file and directory of the module at root. go test caches a
// test's result keyed by the files the test itself opened or stat'ed, and the files go list
// reads are not among them: without this, an import added anywhere would leave this
// test's cached pass standing.
func statSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(path, ".go") || d.Name() == "go.mod" {
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// below returns path relative to nephele's module, false for packages of other modules.
func below(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// under reports whether rel is one of prefixes or below one.
func under(rel string, prefixes ...string) bool {
	for _, p := range prefixes {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// layerOf returns the index of rel's layer: the one with the longest matching prefix.
func layerOf(rel string) (int, bool) {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.prefixes {
			if under(rel, p) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best, best >= 0
}

// listPackages runs go list -json with args in nephele's module, with GOWORK=off as the
// Makefile does: the question is about the module's own graph.
func listPackages(t *testing.T, args ...string) []pkg {
	t.Helper()
	statSources(t, "../..")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test needs the go command: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %s listed no package", strings.Join(args, " "))
	}
	return pkgs
}
