package cgroupfs

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/mountinfo"
)

// hybrid is the cgroup part of a v1 machine with the unified hierarchy beside (this
// project's CI machine).
const hybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
`

func parse(t *testing.T, table string) []mountinfo.Mount {
	t.Helper()
	m, err := mountinfo.Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFromMounts(t *testing.T) {
	tests := []struct {
		name  string
		table string
		want  []Hierarchy
	}{
		{"hybrid", hybrid, []Hierarchy{
			{Mount: "/sys/fs/cgroup/cpu,cpuacct", Options: []string{"rw", "cpu", "cpuacct"}},
			{Mount: "/sys/fs/cgroup/cpuset", Options: []string{"rw", "cpuset"}},
			{Mount: "/sys/fs/cgroup/systemd", Options: []string{"rw", "xattr", "name=systemd"}},
			{Mount: "/sys/fs/cgroup/unified", V2: true, Options: []string{"rw", "nsdelegate"}},
		}},
		{"unified", `25 21 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`, []Hierarchy{{Mount: "/sys/fs/cgroup", V2: true, Options: []string{"rw", "nsdelegate", "memory_recursiveprot"}}}},
		{"one hierarchy mounted twice counts once", `25 21 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
90 21 0:22 / /mnt/cg rw - cgroup2 cgroup2 rw
`, []Hierarchy{{Mount: "/sys/fs/cgroup", V2: true, Options: []string{"rw"}}}},
		{"a mount of the whole tree wins over a bind of a subtree", `90 21 0:22 /some/subtree /mnt/cg rw - cgroup2 cgroup2 rw
25 21 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
91 21 0:22 / /mnt/again rw - cgroup2 cgroup2 rw
`, []Hierarchy{{Mount: "/sys/fs/cgroup", V2: true, Options: []string{"rw"}}}},
		{"only a subtree mounted", `90 21 0:22 /some/subtree /mnt/cg rw - cgroup2 cgroup2 rw
`, []Hierarchy{{Mount: "/mnt/cg", V2: true, Options: []string{"rw"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := FromMounts(parse(t, tt.table))
			if err != nil {
				t.Fatal(err)
			}
			if got := fs.Hierarchies(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hierarchies =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
	if _, err := FromMounts(parse(t, "21 1 254:0 / / rw - ext4 /dev/vda rw\n")); err == nil {
		t.Error("a mount table without cgroups gave hierarchies")
	}
}

func TestHas(t *testing.T) {
	fs, err := FromMounts(parse(t, hybrid))
	if err != nil {
		t.Fatal(err)
	}
	hs := fs.Hierarchies()
	tests := []struct {
		h          int
		controller string
		want       bool
	}{
		{0, "cpu", true},
		{0, "cpuacct", true},
		{0, "cpuset", false},
		{1, "cpuset", true},
		{2, "name=systemd", true},
		{2, "systemd", false},
		{3, "cpuset", false}, // v2 controllers are per cgroup
		{3, "nsdelegate", false},
	}
	for _, tt := range tests {
		if got := hs[tt.h].Has(tt.controller); got != tt.want {
			t.Errorf("%s Has(%q) = %v", hs[tt.h].Mount, tt.controller, got)
		}
	}
}

func TestParsePlacement(t *testing.T) {
	fs, err := FromMounts(parse(t, hybrid))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    string
		want    Placement
		wantErr string
	}{
		{
			name: "every hierarchy",
			file: "12:cpuset:/a\n4:cpu,cpuacct:/b/c\n1:name=systemd:/user.slice\n0::/d:with:colons\n",
			want: Placement{"/sys/fs/cgroup/cpu,cpuacct": "/b/c", "/sys/fs/cgroup/cpuset": "/a",
				"/sys/fs/cgroup/systemd": "/user.slice", "/sys/fs/cgroup/unified": "/d:with:colons"},
		},
		{
			name: "hierarchies the machine does not mount are ignored",
			file: "12:cpuset:/a\n4:cpu,cpuacct:/b\n7:memory:/m\n1:name=systemd:/\n0::/\n",
			want: Placement{"/sys/fs/cgroup/cpu,cpuacct": "/b", "/sys/fs/cgroup/cpuset": "/a",
				"/sys/fs/cgroup/systemd": "/", "/sys/fs/cgroup/unified": "/"},
		},
		{name: "a hierarchy without its line", file: "12:cpuset:/a\n1:name=systemd:/\n0::/\n", wantErr: "cpu,cpuacct"},
		{name: "a line for part of a hierarchy's controllers only matches it", file: "12:cpuset:/a\n4:cpu:/b\n1:name=systemd:/\n0::/\n",
			want: Placement{"/sys/fs/cgroup/cpu,cpuacct": "/b", "/sys/fs/cgroup/cpuset": "/a",
				"/sys/fs/cgroup/systemd": "/", "/sys/fs/cgroup/unified": "/"}},
		{name: "no v2 line", file: "12:cpuset:/a\n4:cpu,cpuacct:/b\n1:name=systemd:/\n", wantErr: "unified"},
		{name: "malformed", file: "12:cpuset\n", wantErr: "malformed"},
		{name: "relative path", file: "0::relative\n", wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fs.parsePlacement(strings.NewReader(tt.file))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("placement = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestPathsRefuseTheRootAndUncleanPaths(t *testing.T) {
	// Hierarchies in an empty directory: had a path been taken, nothing real is touched.
	dir := t.TempDir()
	fs, err := FromMounts(parse(t, strings.ReplaceAll(hybrid, "/sys/fs/cgroup", dir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"/", "", "relative", "/a/../b", "/a/", "/a//b", "/.", "/a/."} {
		calls := map[string]error{
			"Create":    fs.Create(rel),
			"Join":      fs.Join(os.Getpid(), rel),
			"Remove":    fs.Remove(t.Context(), rel),
			"RemoveDir": fs.RemoveDir(t.Context(), rel),
		}
		_, calls["Missing"] = fs.Missing(rel)
		_, calls["Procs"] = fs.Procs(rel)
		_, calls["Kill"] = fs.Kill(t.Context(), rel, nil)
		_, calls["Children"] = fs.Children(rel)
		for name, err := range calls {
			if err == nil || !strings.Contains(err.Error(), "not a clean absolute path below the root") {
				t.Errorf("%s(%q) = %v, want it refused", name, rel, err)
			}
		}
	}
}

func TestDirsAndProcsFiles(t *testing.T) {
	fs, err := FromMounts(parse(t, hybrid))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/sys/fs/cgroup/cpu,cpuacct/x/y/cgroup.procs", "/sys/fs/cgroup/cpuset/x/y/cgroup.procs",
		"/sys/fs/cgroup/systemd/x/y/cgroup.procs", "/sys/fs/cgroup/unified/x/y/cgroup.procs"}
	if got := fs.ProcsFiles("/x/y"); !reflect.DeepEqual(got, want) {
		t.Errorf("ProcsFiles = %v, want %v", got, want)
	}
	if got := fs.Dirs("/x/y"); len(got) != 4 || got[3] != "/sys/fs/cgroup/unified/x/y" {
		t.Errorf("Dirs = %v", got)
	}
}
