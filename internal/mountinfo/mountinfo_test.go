package mountinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Mount
	}{
		{
			name: "no optional fields",
			line: `30 22 0:40 / /run rw,nosuid - tmpfs nephele-node rw,size=65536k`,
			want: Mount{ID: 30, Parent: 22, Major: 0, Minor: 40, Root: "/", Point: "/run", Options: "rw,nosuid",
				FSType: "tmpfs", Source: "nephele-node", SuperOptions: "rw,size=65536k"},
		},
		{
			name: "optional fields",
			line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue`,
			want: Mount{ID: 36, Parent: 35, Major: 98, Minor: 0, Root: "/mnt1", Point: "/mnt2", Options: "rw,noatime",
				FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"},
		},
		{
			name: "escaped paths",
			line: `43 21 0:53 /a\134b /srv/with\040space\011tab rw - ext4 /dev/my\040disk rw`,
			want: Mount{ID: 43, Parent: 21, Major: 0, Minor: 53, Root: `/a\b`, Point: "/srv/with space\ttab", Options: "rw",
				FSType: "ext4", Source: "/dev/my disk", SuperOptions: "rw"},
		},
		{
			name: "cgroup v1 hierarchy",
			line: `40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd`,
			want: Mount{ID: 40, Parent: 31, Major: 0, Minor: 37, Root: "/", Point: "/sys/fs/cgroup/systemd", Options: "rw,relatime",
				FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,xattr,name=systemd"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.line + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("Parse(%q) =\n%+v\nwant\n%+v", tt.line, got, tt.want)
			}
		})
	}
}

func TestParseRefusesMalformedLines(t *testing.T) {
	good := `22 21 0:20 / /run rw,nosuid shared:2 - tmpfs tmpfs rw`
	tests := []struct{ name, line string }{
		{"garbage", "garbage"},
		{"no separator", `22 21 0:20 / /run rw,nosuid shared:2 tmpfs tmpfs rw`},
		{"separator too early", `22 21 0:20 / /run - tmpfs tmpfs rw`},
		{"no super options", `22 21 0:20 / /run rw - tmpfs tmpfs`},
		{"no source", `22 21 0:20 / /run rw - tmpfs`},
		{"ID not a number", `x 21 0:20 / /run rw - tmpfs tmpfs rw`},
		{"parent not a number", `22 x 0:20 / /run rw - tmpfs tmpfs rw`},
		{"device without minor", `22 21 20 / /run rw - tmpfs tmpfs rw`},
		{"device not numbers", `22 21 a:b / /run rw - tmpfs tmpfs rw`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bad line among good ones fails the whole table: nothing is left out.
			_, err := Parse(strings.NewReader(good + "\n" + tt.line + "\n" + good + "\n"))
			if err == nil || !strings.Contains(err.Error(), "malformed line") {
				t.Errorf("Parse accepted %q: err = %v", tt.line, err)
			}
		})
	}
}

func TestParseTable(t *testing.T) {
	const table = `21 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
22 21 0:20 / /run rw,nosuid shared:2 - tmpfs tmpfs rw
31 30 254:0 /srv/hosts/a /run/hosts/a rw - ext4 /dev/vda rw
`
	mounts, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, m := range mounts {
		points = append(points, m.Point)
	}
	if got := strings.Join(points, " "); got != "/ /run /run/hosts/a" {
		t.Errorf("mount points in order = %s", got)
	}
	if empty, err := Parse(strings.NewReader("")); err != nil || len(empty) != 0 {
		t.Errorf("Parse of an empty table = %v, %v", empty, err)
	}
}

func TestUnescape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/plain/path", "/plain/path"},
		{`/with\040space`, "/with space"},
		{`/tab\011and\012newline`, "/tab\tand\nnewline"},
		{`/back\134slash`, `/back\slash`},
		{`/not\04`, `/not\04`},     // too short for an escape
		{`/not\089`, `/not\089`},   // not octal
		{`/end\`, `/end\`},         // lone backslash at the end
		{`\040\040`, "  "},         // escapes next to each other
		{`/high\777`, `/high\777`}, // more than a byte
		{`/\134040`, `/\040`},      // an escaped backslash is not unescaped twice
	}
	for _, tt := range tests {
		if got := Unescape(tt.in); got != tt.want {
			t.Errorf("Unescape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReadAndIsMountPoint(t *testing.T) {
	mounts, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) == 0 {
		t.Fatal("the process's mount table is empty")
	}
	dir := t.TempDir()
	tests := []struct {
		path string
		want bool
	}{
		{mounts[len(mounts)-1].Point, true},
		{"/proc", true},
		{filepath.Join(dir, "nothing-mounted-here"), false},
		{dir, false},
	}
	for _, tt := range tests {
		got, err := IsMountPoint(tt.path)
		if err != nil || got != tt.want {
			t.Errorf("IsMountPoint(%q) = %v, %v; want %v", tt.path, got, err, tt.want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadFile of a missing file succeeded")
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("ReadFile of a malformed table: %v, want an error naming %s", err, bad)
	}
}
