package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestsCommandRendersDeploy: `nephele manifests` with no flags prints
// deploy/cloud-controller-manager.yaml, and --kustomize-dir writes deploy/kustomize.
func TestManifestsCommandRendersDeploy(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"manifests"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "deploy", "cloud-controller-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Error("`nephele manifests` differs from deploy/cloud-controller-manager.yaml: run `make manifests`")
	}

	dir := t.TempDir()
	stale := filepath.Join(dir, "monitoring.yaml")
	mine := filepath.Join(dir, "patch.yaml")
	for path, data := range map[string]string{stale: "# Rendered by `nephele manifests`; regenerate, do not edit (docs/deploy.md).\n", mine: "kind: x\n"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd = newRootCommand()
	cmd.SetArgs([]string{"manifests", "--kustomize-dir", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kustomization.yaml", "rbac.yaml", "service.yaml", "deployment.yaml"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kustomize", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from deploy/kustomize/%s", name, name)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a rendered file the base no longer lists was left: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file nephele did not write was removed: %v", err)
	}
}

func TestManifestsCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"manifests", "--replicas=0"}, "invalid value for --replicas: 0: must be at least 1"},
		{[]string{"manifests", "--extra-arg=--cloud-provider=aws"}, "invalid value for --extra-arg: \"--cloud-provider=aws\": --cloud-provider is set by the rendering: use --provider"},
		{[]string{"manifests", "--permissions", "--kustomize-dir=x"}, "--permissions and --kustomize-dir: give one"},
		{[]string{"manifests", "csi", "--controller-replicas=0", "--device-dir=rel"}, "invalid value for --controller-replicas: 0: want at least 1\ninvalid value for --device-dir: \"rel\""},
		{[]string{"manifests", "csi", "--image-pull-policy=Sometimes"}, "invalid value for --image-pull-policy: \"Sometimes\": want Always, IfNotPresent or Never"},
		{[]string{"manifests", "csi", "--driver-name=Not_A_Name"}, "invalid value for --driver-name"},
		{[]string{"images", "--out=x", "--platforms=linux/s390x"}, `invalid value for --platforms: platform "linux/s390x"`},
		{[]string{"images", "--out=x", "--program=ccm"}, `invalid value for --program: "ccm": want NAME=./path/to/command`},
	}
	for _, tt := range tests {
		cmd := newRootCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(tt.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestCSIManifestsCommand renders the CSI driver with flags, as YAML and as a kustomize
// base holding the same objects.
func TestCSIManifestsCommand(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"manifests", "csi", "--driver-name=disks.example.com", "--storage-class=false", "--device-dir=/srv/disks"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: CSIDriver\nmetadata:", "name: disks.example.com", "kind: DaemonSet", "path: /srv/disks", "mountPropagation: Bidirectional"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "kind: StorageClass") {
		t.Error("--storage-class=false rendered a StorageClass")
	}
	dir := t.TempDir()
	cmd = newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"manifests", "csi", "--kustomize-dir", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(k), "- rbac.yaml") || !strings.Contains(string(k), "- deployment.yaml") {
		t.Errorf("kustomization.yaml:\n%s", k)
	}
}

func TestManifestsPermissions(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"manifests", "--permissions", "--controllers=service"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "`services/status`") || strings.Contains(out.String(), "`nodes/status`") {
		t.Errorf("permissions of --controllers=service:\n%s", out.String())
	}
}
