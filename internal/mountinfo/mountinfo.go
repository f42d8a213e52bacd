package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of a mount table.
type Mount struct {
	// ID is the mount's unique ID; Parent the ID of the mount it is on (its own ID for
	// the root of the table).
	ID, Parent int
	// Major and Minor are the device of the filesystem (st_dev): mounts of one
	// filesystem, such as one cgroup hierarchy mounted twice, share it.
	Major, Minor int
	// Root is the path inside the filesystem that is mounted ("/" for all of it).
	Root string
	// Point is where it is mounted.
	Point string
	// Options are the per-mount options (rw, nosuid, relatime, ...).
	Options string
	// FSType is the filesystem type (ext4, tmpfs, cgroup2, ...).
	FSType string
	// Source is the filesystem's source ("/dev/vda", "tmpfs", a name given to mount).
	Source string
	// SuperOptions are the filesystem's own options: for a cgroup v1 hierarchy, its
	// controllers ("rw,cpu,cpuacct") or its name ("rw,name=systemd").
	SuperOptions string
}

// Read parses the calling process's mount table, /proc/self/mountinfo.
func Read() ([]Mount, error) {
	return ReadFile("/proc/self/mountinfo")
}

// ReadFile parses the mount table at path, such as /proc/<pid>/mountinfo for another
// process's mount namespace.
func ReadFile(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer func() { _ = f.Close() }()
	mounts, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return mounts, nil
}

// Parse parses the mountinfo format of proc(5):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// The optional fields (master:1) may be any in number; "-" ends them. A line without the
// ten fields, or with a field that is not what the format says, is an error.
func Parse(r io.Reader) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m, err := parseLine(sc.Text())
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse mount table: %w", err)
	}
	return mounts, nil
}

// parseLine parses one line of a mount table.
func parseLine(line string) (Mount, error) {
	bad := fmt.Errorf("parse mount table: malformed line %q", line)
	fields := strings.Fields(line)
	// No field before the optional ones can be "-": IDs and the device are numbers,
	// paths start with "/", the options with rw or ro.
	sep := slices.Index(fields, "-")
	if sep < 6 || len(fields) < sep+4 {
		return Mount{}, bad
	}
	id, err1 := strconv.Atoi(fields[0])
	parent, err2 := strconv.Atoi(fields[1])
	majS, minS, ok := strings.Cut(fields[2], ":")
	major, err3 := strconv.Atoi(majS)
	minor, err4 := strconv.Atoi(minS)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !ok {
		return Mount{}, bad
	}
	return Mount{
		ID:           id,
		Parent:       parent,
		Major:        major,
		Minor:        minor,
		Root:         Unescape(fields[3]),
		Point:        Unescape(fields[4]),
		Options:      fields[5],
		FSType:       fields[sep+1],
		Source:       Unescape(fields[sep+2]),
		SuperOptions: fields[sep+3],
	}, nil
}

// Unescape undoes the octal escapes (\040 for a space, \011 tab, \012 newline, \134
// backslash) the kernel writes in the paths of a mount table. A backslash not followed by
// three octal digits stands for itself.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// IsMountPoint reports whether something is mounted on path in the calling process's
// mount namespace. path is compared as given: it must be absolute and clean.
func IsMountPoint(path string) (bool, error) {
	mounts, err := Read()
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(mounts, func(m Mount) bool { return m.Point == path }), nil
}
