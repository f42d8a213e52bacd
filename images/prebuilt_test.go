package images

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestCoreDNSVersionIsPinned keeps CoreDNSVersion, the tag of the coredns image, equal
// to the version hack/tools/coredns builds.
func TestCoreDNSVersionIsPinned(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "hack", "tools", "coredns", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/coredns/coredns (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("hack/tools/coredns/go.mod does not require github.com/coredns/coredns")
	}
	if got := string(m[1]); got != CoreDNSVersion {
		t.Errorf("hack/tools/coredns pins %s, CoreDNSVersion is %s: keep them equal", got, CoreDNSVersion)
	}
	if CoreDNS.Ref() != Registry+"/coredns:"+CoreDNSVersion {
		t.Errorf("CoreDNS.Ref() = %s", CoreDNS.Ref())
	}
}
