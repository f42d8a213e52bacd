package securedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
)

// nobody is the uid of the unprivileged user the attacks are made as.
const nobody = 65534

func TestCheck(t *testing.T) {
	hoststest.RequireRoot(t) // chown to another user
	base := t.TempDir()      // 0700, root's, below /tmp (1777, sticky): trusted
	mk := func(t *testing.T, rel string, mode os.FileMode, uid int) string {
		t.Helper()
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(t *testing.T, rel, target string, uid int) string {
		t.Helper()
		p := filepath.Join(base, rel)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name  string
		dir   func(t *testing.T) string
		wantC string // the component named in the error; "" when trusted
	}{
		{"root's own directory", func(t *testing.T) string { return mk(t, "ok/state", 0o755, 0) }, ""},
		{"a world-writable parent with the sticky bit", func(t *testing.T) string {
			mk(t, "sticky", os.ModeSticky|0o777, 0)
			return mk(t, "sticky/state", 0o700, 0)
		}, ""},
		{"the directory is another user's", func(t *testing.T) string { return mk(t, "theirs", 0o755, nobody) }, "theirs"},
		{"a parent is another user's", func(t *testing.T) string {
			mk(t, "home", 0o755, nobody)
			return mk(t, "home/state", 0o700, 0)
		}, "home"},
		{"the directory is world-writable", func(t *testing.T) string { return mk(t, "open", 0o777, 0) }, "open"},
		{"the directory is group-writable even if sticky", func(t *testing.T) string { return mk(t, "group", os.ModeSticky|0o775, 0) }, "group"},
		{"a parent is world-writable without the sticky bit", func(t *testing.T) string {
			mk(t, "shared", 0o777, 0)
			return mk(t, "shared/state", 0o700, 0)
		}, "shared"},
		{"a link another user owns", func(t *testing.T) string {
			target := mk(t, "real", 0o700, 0)
			return link(t, "theirlink", target, nobody)
		}, "theirlink"},
		{"root's link to root's directory", func(t *testing.T) string {
			target := mk(t, "real2", 0o700, 0)
			return link(t, "mylink", target, 0)
		}, ""},
		{"root's link into another user's tree", func(t *testing.T) string {
			mk(t, "other", 0o755, nobody)
			target := mk(t, "other/state", 0o700, 0)
			return link(t, "mylink2", target, 0)
		}, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.dir(t))
			var ue *UntrustedError
			switch {
			case tt.wantC == "" && err != nil:
				t.Fatalf("Check() = %v, want trusted", err)
			case tt.wantC != "" && !errors.As(err, &ue):
				t.Fatalf("Check() = %v, want an *UntrustedError naming %s", err, tt.wantC)
			case tt.wantC != "" && filepath.Base(ue.Component) != tt.wantC:
				t.Fatalf("Check() names %s, want %s: %v", ue.Component, tt.wantC, err)
			case tt.wantC != "" && !strings.Contains(err.Error(), "cannot be trusted"):
				t.Fatalf("Check() = %q, want it to say why", err)
			}
		})
	}
}
