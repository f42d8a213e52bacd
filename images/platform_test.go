package images

import (
	"strings"
	"testing"
)

// TestHostPlatform: the machine's platform is linux and its GOARCH when nephele builds
// images for it; any other architecture is refused by name.
func TestHostPlatform(t *testing.T) {
	tests := []struct {
		goarch  string
		want    Platform
		wantErr string
	}{
		{"amd64", LinuxAMD64, ""},
		{"arm64", LinuxARM64, ""},
		{"riscv64", Platform{}, "GOARCH=riscv64"},
		{"386", Platform{}, "GOARCH=386"},
	}
	for _, tt := range tests {
		t.Run(tt.goarch, func(t *testing.T) {
			got, err := hostPlatform(tt.goarch)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("hostPlatform(%s) = %v, %v; want %v, an error naming %q", tt.goarch, got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := HostPlatform(); err != nil {
		t.Logf("this machine: %v", err)
	}
}
