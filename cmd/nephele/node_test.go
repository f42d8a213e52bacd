package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeBootRefusesBeforeBooting checks that `nephele node boot` stops at a missing or
// invalid configuration with what is wrong, before touching the host.
func TestNodeBootRefusesBeforeBooting(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("apiVersion: node.nephele.dev/v1alpha1\nkind: NodeConfig\nnodeIP: not-an-ip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no config", []string{"node", "boot"}, []string{`"config" not set`}},
		{"missing file", []string{"node", "boot", "--config", filepath.Join(dir, "missing.yaml")}, []string{"read node config"}},
		{"invalid", []string{"node", "boot", "--config", invalid}, []string{"invalid node config", "nodeIP:", "binDir: required", "sandboxImage: required"}},
		{"images without --out", []string{"node", "images"}, []string{`"out" not set`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newRootCommand()
			root.SetArgs(tt.args)
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			err := root.Execute()
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("nephele %s: %v, want an error containing %q", strings.Join(tt.args, " "), err, w)
				}
			}
		})
	}
}
