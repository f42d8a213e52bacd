package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/operator/bootstrap"
)

// TestManifestsCommandPrintsOperatorYAML: the command prints the checked-in manifests.
func TestManifestsCommandPrintsOperatorYAML(t *testing.T) {
	cmd := newManifestsCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../operator/install/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Error("nephele-operator manifests differs from operator/install/operator.yaml: run make manifests")
	}
}

func TestRenderCommandWritesFiles(t *testing.T) {
	dir := t.TempDir()
	cc := filepath.Join(dir, "local.yaml")
	if err := os.WriteFile(cc, []byte("endpoint: http://10.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := newRenderCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"--platform", "local", "--out", out, "--kubeconfig-path", "/etc/kubernetes/ccm.kubeconfig", "--cloud-config", cc})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{bootstrap.ManifestFile, bootstrap.CloudConfigFile, bootstrap.CABundleFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("output %q does not list %s", stdout.String(), f)
		}
	}
}
