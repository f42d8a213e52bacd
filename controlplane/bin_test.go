package controlplane

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "repo", "go.mod"), "// the main module\nmodule github.com/nephele-dev/nephele // trailing\n\ngo 1.26\n", 0o644)
	writeFile(t, filepath.Join(root, "repo", "hack", "tools", "go.mod"), "module github.com/nephele-dev/nephele/hack/tools\n", 0o644)
	writeFile(t, filepath.Join(root, "quoted", "go.mod"), "module \"github.com/nephele-dev/nephele\"\n", 0o644)
	writeFile(t, filepath.Join(root, "other", "go.mod"), "module example.com/other\n", 0o644)
	for _, d := range []string{"repo/controlplane", "repo/hack/tools/kwok", "quoted/pkg", "other/pkg"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name    string
		from    string
		want    string
		wantErr bool
	}{
		{name: "module root itself", from: "repo", want: "repo"},
		{name: "package directory", from: "repo/controlplane", want: "repo"},
		{name: "passes over nested module", from: "repo/hack/tools/kwok", want: "repo"},
		{name: "quoted module path", from: "quoted/pkg", want: "quoted"},
		{name: "other module only", from: "other/pkg", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := moduleRoot(filepath.Join(root, tt.from), modulePath)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("moduleRoot() = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("moduleRoot() error: %v", err)
			}
			if want := filepath.Join(root, tt.want); got != want {
				t.Errorf("moduleRoot() = %q, want %q", got, want)
			}
		})
	}
}

func TestBinDir(t *testing.T) {
	t.Run("repository bin", func(t *testing.T) {
		t.Setenv(BinDirEnv, "")
		got, err := BinDir()
		if err != nil {
			t.Fatal(err)
		}
		// Tests run in controlplane, one level below the module root.
		want, err := filepath.Abs(filepath.Join("..", "bin"))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("BinDir() = %q, want %q", got, want)
		}
	})
	t.Run("override", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv(BinDirEnv, dir)
		got, err := BinDir()
		if err != nil {
			t.Fatal(err)
		}
		if got != dir {
			t.Errorf("BinDir() = %q, want %q", got, dir)
		}
	})
}

// TestStartMissingBinary checks Start names the first missing piece and says how to get
// it, before starting anything; the fake binaries are never run.
func TestStartMissingBinary(t *testing.T) {
	const exe = "#!/bin/sh\nexit 1\n"
	tests := []struct {
		name        string
		present     []string
		opts        Options
		wantMissing []string
	}{
		{name: "empty bin", opts: Options{}, wantMissing: []string{"etcd", "kube-apiserver"}},
		{name: "no apiserver", present: []string{"etcd"}, wantMissing: []string{"kube-apiserver"}},
		{
			name:        "controller manager requested",
			present:     []string{"etcd", "kube-apiserver", "kube-scheduler"},
			opts:        Options{ControllerManager: true, Scheduler: true},
			wantMissing: []string{"kube-controller-manager"},
		},
		{
			name:        "scheduler requested",
			present:     []string{"etcd", "kube-apiserver"},
			opts:        Options{Scheduler: true},
			wantMissing: []string{"kube-scheduler"},
		},
		{
			name:        "kwok without stages",
			present:     []string{"etcd", "kube-apiserver", "kwok"},
			opts:        Options{Kwok: true},
			wantMissing: []string{"kwok-stages/*.yaml"},
		},
		{
			name:        "kwok without binary",
			present:     []string{"etcd", "kube-apiserver", "kwok-stages/node.yaml"},
			opts:        Options{Kwok: true},
			wantMissing: []string{"kwok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range tt.present {
				writeFile(t, filepath.Join(dir, name), exe, 0o755)
			}
			t.Setenv(BinDirEnv, dir)

			env, err := Start(context.Background(), tt.opts)
			if err == nil {
				_ = env.Stop()
				t.Fatal("Start() succeeded without binaries")
			}
			var missing *MissingBinaryError
			if !errors.As(err, &missing) {
				t.Fatalf("Start() error %v is not a *MissingBinaryError", err)
			}
			for _, name := range tt.wantMissing {
				want := filepath.Join(dir, name) + " not found: run make tools"
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Start() error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestMissingBinaryNotExecutable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "etcd"), "not a program", 0o644)
	_, err := binary(dir, "etcd")
	var missing *MissingBinaryError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "run make tools") {
		t.Fatalf("binary() error = %v, want a MissingBinaryError saying to run make tools", err)
	}
}
