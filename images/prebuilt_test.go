package images

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestVersionsArePinned keeps each prebuilt image's tag equal to the version its tool
// module under hack/tools builds.
func TestVersionsArePinned(t *testing.T) {
	for _, tc := range []struct {
		image    Prebuilt
		toolDir  string
		module   string
		wantName string
	}{
		{CoreDNS, "coredns", "github.com/coredns/coredns", "coredns"},
		{CSIProvisioner, "csi", "github.com/kubernetes-csi/external-provisioner/v6", "csi-provisioner"},
		{CSIAttacher, "csi", "github.com/kubernetes-csi/external-attacher/v4", "csi-attacher"},
		{CSIResizer, "csi", "github.com/kubernetes-csi/external-resizer/v2", "csi-resizer"},
	} {
		t.Run(tc.image.Name, func(t *testing.T) {
			gomod, err := os.ReadFile(filepath.Join("..", "hack", "tools", tc.toolDir, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(tc.module) + ` (v\S+)`).FindSubmatch(gomod)
			if m == nil {
				t.Fatalf("hack/tools/%s/go.mod does not require %s", tc.toolDir, tc.module)
			}
			if got := string(m[1]); got != tc.image.Version {
				t.Errorf("hack/tools/%s pins %s %s, the image's tag is %s: keep them equal", tc.toolDir, tc.module, got, tc.image.Version)
			}
			if want := Registry + "/" + tc.wantName + ":" + string(m[1]); tc.image.Ref() != want {
				t.Errorf("Ref() = %s, want %s", tc.image.Ref(), want)
			}
		})
	}
}
