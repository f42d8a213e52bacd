package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCloud(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "endpoint: http://127.0.0.1:1\ntoken: x\n")
	bad := write("bad.yaml", "endpoint: ftp://x\ntoken: x\n")
	tests := []struct {
		name, provider, config string
		wantErr                string // "" for success
	}{
		{name: "local", provider: "local", config: good},
		{name: "no provider", provider: "", config: good, wantErr: "pass --cloud-provider=local"},
		{name: "another provider", provider: "aws", config: good, wantErr: `--cloud-provider=aws: this controller carries only ["local" "localb"]`},
		{name: "no config", provider: "local", wantErr: "--cloud-config is required"},
		{name: "missing config", provider: "local", config: filepath.Join(dir, "missing.yaml"), wantErr: "no such file"},
		{name: "bad config", provider: "local", config: bad, wantErr: "--cloud-config " + bad},
	}
	// Twice: the process-wide registry this replaces exits on a second registration.
	for range 2 {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cl, err := openCloud(tt.provider, tt.config)
				if tt.wantErr == "" {
					if err != nil || cl == nil || cl.ProviderName() != "local" {
						t.Fatalf("openCloud = %v, %v; want the local cloud", cl, err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("openCloud error = %v, want one containing %q", err, tt.wantErr)
				}
			})
		}
	}
}
