package upstream_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUpstreamStaysOutOfTheBinaries guards the design rule that nephele's core never
// imports k8s.io/kubernetes and that only this package brings in k8s.io/cloud-provider:
// no binary of the module links either, and k8s.io/kubernetes is not even in the module
// graph. The one exception is k8s.io/cloud-provider/api, the well-known taint and
// annotation names every cloud-controller-manager shares: constants with no imports,
// used so that each name is defined once. The go commands run with GOWORK=off: the question is about nephele's own module,
// not the workspace (go.work) that joins it with bench/, whose graph holds more.
func TestUpstreamStaysOutOfTheBinaries(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test needs the go command: %v", err)
	}
	goCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(t.Context(), goTool, args...)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		return cmd
	}
	out, err := goCmd("list", "-deps", "-f", "{{.ImportPath}}", "github.com/nephele-dev/nephele/cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if line == "k8s.io/cloud-provider/api" {
			continue
		}
		if strings.HasPrefix(line, "k8s.io/kubernetes") || strings.HasPrefix(line, "k8s.io/cloud-provider") {
			t.Errorf("nephele's binaries link %s", line)
		}
	}
	out, err = goCmd("list", "-m", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "k8s.io/kubernetes ") {
			t.Errorf("the module graph holds %s", line)
		}
	}
}
