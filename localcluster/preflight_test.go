package localcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestMissingPackages(t *testing.T) {
	tests := []struct {
		name    string
		present []string // commands found
		want    string   // in Missing or Fix; empty: nothing missing
	}{
		{"everything there", []string{"runc", "iptables", "iptables-restore", "ip6tables", "mount", "umount", "nsenter", "unshare", "ip", "blkid", "fsck", "mkfs.ext4", "resize2fs", "blockdev", "e2fsck", "dumpe2fs", "mkfs.xfs", "xfs_growfs"}, ""},
		{"found in /usr/sbin only", []string{"/usr/sbin/runc", "iptables", "iptables-restore", "ip6tables", "mount", "umount", "nsenter", "unshare", "/sbin/ip", "/sbin/blkid", "/sbin/fsck", "/sbin/mkfs.ext4", "/sbin/resize2fs", "/sbin/blockdev", "/sbin/e2fsck", "/sbin/dumpe2fs", "/sbin/mkfs.xfs", "/usr/sbin/xfs_growfs"}, ""},
		{"runc missing", []string{"iptables", "iptables-restore", "ip6tables", "mount", "umount", "nsenter", "unshare", "ip", "blkid", "fsck", "mkfs.ext4", "resize2fs", "blockdev", "e2fsck", "dumpe2fs", "mkfs.xfs", "xfs_growfs"},
			"apt-get install -y --no-install-recommends runc"},
		{"one package for several commands", []string{"runc", "mount", "umount", "nsenter", "unshare", "ip", "blkid", "fsck", "mkfs.ext4", "resize2fs", "blockdev", "e2fsck", "dumpe2fs", "mkfs.xfs", "xfs_growfs"},
			"programs iptables, iptables-restore, ip6tables (Debian packages iptables)"},
		{"the volume tools", []string{"runc", "iptables", "iptables-restore", "ip6tables", "mount", "umount", "nsenter", "unshare", "ip", "blkid", "fsck", "blockdev"},
			"programs mkfs.ext4, resize2fs, e2fsck, dumpe2fs, mkfs.xfs, xfs_growfs (Debian packages e2fsprogs, xfsprogs)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := missingPackages(func(c string) (string, error) {
				if slices.Contains(tt.present, c) {
					return c, nil
				}
				return "", exec.ErrNotFound
			})
			switch {
			case tt.want == "" && p != nil:
				t.Errorf("missingPackages() = %+v, want nothing missing", *p)
			case tt.want != "" && (p == nil || !strings.Contains(p.Missing+" "+p.Fix, tt.want)):
				t.Errorf("missingPackages() = %+v, want it to say %q", p, tt.want)
			}
		})
	}
}

// TestNodeDepsMatchTheScript keeps nodeDeps and hack/install-node-deps.sh, which make
// node-deps runs, listing the same programs and packages.
func TestNodeDepsMatchTheScript(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "hack", "install-node-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`(?m)^\s*"(\S+) (\S+) [^"]*"\s*$`)
	var script []nodeDep
	for _, m := range entry.FindAllStringSubmatch(string(raw), -1) {
		script = append(script, nodeDep{m[1], m[2]})
	}
	if !slices.Equal(script, nodeDeps) {
		t.Errorf("hack/install-node-deps.sh lists %v, nodeDeps %v: keep them equal", script, nodeDeps)
	}
}

// TestToolBinariesMatchTheMakefile keeps toolBinaries and kwokToolBinaries, what
// preflight asks `make tools` for, and the Makefile's TOOL_BINS, what `make tools`
// builds, the same set: the Makefile is the source, and what it builds that no cluster's
// preflight checks is named here with the reason.
func TestToolBinariesMatchTheMakefile(t *testing.T) {
	notForClusters := map[string]string{
		"kwok-stages/.stamp":            "a stamp file beside kwok's stage definitions, not a program",
		"kube-controller-manager-v1.35": "the leader-migration peer of manager's interop test",
	}
	raw, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	built := makeVariable(t, string(raw), "TOOL_BINS")
	var want []string
	for _, b := range built {
		if _, skip := notForClusters[b]; !skip {
			want = append(want, b)
		}
	}
	for b := range notForClusters {
		if !slices.Contains(built, b) {
			t.Errorf("the Makefile's TOOL_BINS no longer builds %s: drop it from notForClusters", b)
		}
	}
	got := slices.Compact(slices.Sorted(slices.Values(slices.Concat(toolBinaries, kwokToolBinaries))))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("toolBinaries and kwokToolBinaries %v, the Makefile's TOOL_BINS (less notForClusters) %v: keep them equal", got, want)
	}
}

// makeVariable expands the Makefile variable name (NAME := words, with \ continuations
// and $(VAR) references) into its words, each relative to $(BIN).
func makeVariable(t *testing.T, makefile, name string) []string {
	t.Helper()
	vars := map[string]string{}
	def := regexp.MustCompile(`^([A-Z_0-9]+)\s*:?=\s*(.*)$`)
	lines := strings.Split(strings.ReplaceAll(makefile, "\\\n", " "), "\n")
	for _, l := range lines {
		if m := def.FindStringSubmatch(l); m != nil {
			vars[m[1]] = m[2]
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Z_0-9]+)\)`)
	var expand func(string, int) string
	expand = func(s string, depth int) string {
		if depth > 10 {
			t.Fatalf("the Makefile's %s refers to itself", name)
		}
		return ref.ReplaceAllStringFunc(s, func(r string) string {
			v := ref.FindStringSubmatch(r)[1]
			if v == "BIN" {
				return "$(BIN)"
			}
			return expand(vars[v], depth+1)
		})
	}
	value, ok := vars[name]
	if !ok {
		t.Fatalf("the Makefile defines no %s", name)
	}
	var out []string
	for _, w := range strings.Fields(expand(value, 0)) {
		rel, ok := strings.CutPrefix(w, "$(BIN)/")
		if !ok {
			t.Fatalf("the Makefile's %s holds %q, not a file under $(BIN)", name, w)
		}
		out = append(out, rel)
	}
	return out
}

func TestPreflightNamesWhatIsMissing(t *testing.T) {
	bin := t.TempDir()
	err := Preflight(bin)
	var pe *PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("Preflight(empty bin dir) = %v, want a *PreflightError", err)
	}
	msg := err.Error()
	for _, want := range []string{"kubelet", "fix: make tools", "nephele", "fix: make build", "pause.tar", "fix: make node-images"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Preflight's error does not say %q:\n%s", want, msg)
		}
	}
	if os.Geteuid() != 0 && !strings.Contains(msg, "root") {
		t.Errorf("Preflight as a user does not say root is needed:\n%s", msg)
	}

	// What the caller builds itself is not asked for.
	err = Preflight(bin, append(BuiltBinaries, "images")...)
	if err == nil || strings.Contains(err.Error(), "make build") || strings.Contains(err.Error(), "make node-images") {
		t.Errorf("Preflight with everything of ours to be built: %v; want only the tools missing", err)
	}
}
