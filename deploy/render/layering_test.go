package render

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDeployImportsNoOperator guards the layering between the CCM's manifests and the
// operator: deploy/ renders what the operator manages, so the operator imports
// deploy/render, and nothing under deploy/ may import the operator back (the operator's
// own manifests live in operator/install for that reason). Test files are left out:
// deploy/e2e's tests bring a whole cluster up, operator and all. The go command runs
// with GOWORK=off, as the Makefile does: the question is about nephele's own module.
func TestDeployImportsNoOperator(t *testing.T) {
	const operator = "github.com/nephele-dev/nephele/operator"
	for _, dep := range goListDeps(t, "github.com/nephele-dev/nephele/deploy/...") {
		if dep == operator || strings.HasPrefix(dep, operator+"/") {
			t.Errorf("a package under deploy/ imports %s: the operator builds on deploy/render, not the other way round", dep)
		}
	}
}

// goListDeps returns the import paths of the non-test dependencies of patterns,
// the patterns' own packages included.
func goListDeps(t *testing.T, patterns ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test needs the go command: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, patterns...)...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(patterns, " "), err, stderr)
	}
	return strings.Fields(string(out))
}
