package kubenode

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	ID, Parent int
	Root       string // the path in the source filesystem that is mounted
	Point      string // where it is mounted
	FSType     string
	Source     string
}

// readMountinfo parses /proc/self/mountinfo.
func readMountinfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo parses the mountinfo format of proc(5):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountinfo(r io.Reader) ([]mount, error) {
	var mounts []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 7 || sep < 6 || len(fields) < sep+3 {
			return nil, fmt.Errorf("parse mounts: malformed line %q", sc.Text())
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("parse mounts: malformed line %q", sc.Text())
		}
		mounts = append(mounts, mount{
			ID:     id,
			Parent: parent,
			Root:   unescapeMountPath(fields[3]),
			Point:  unescapeMountPath(fields[4]),
			FSType: fields[sep+1],
			Source: unescapeMountPath(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse mounts: %w", err)
	}
	return mounts, nil
}

// unescapeMountPath undoes the octal escapes (\040 for a space) of mountinfo paths.
func unescapeMountPath(s string) string {
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

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// unmountOrder returns the mounts to take down, children before their parents: every
// mount selected, and every mount on top of or inside one.
func unmountOrder(mounts []mount, selected func(mount) bool) []mount {
	byID := map[int]mount{}
	children := map[int][]int{}
	for _, m := range mounts {
		byID[m.ID] = m
		children[m.Parent] = append(children[m.Parent], m.ID)
	}
	chosen := map[int]bool{}
	var mark func(id int)
	mark = func(id int) {
		if chosen[id] {
			return
		}
		chosen[id] = true
		for _, c := range children[id] {
			mark(c)
		}
	}
	for _, m := range mounts {
		if selected(m) {
			mark(m.ID)
		}
	}
	depth := func(id int) int {
		d := 0
		for seen := 0; seen < len(mounts); seen++ {
			m, ok := byID[id]
			if !ok || m.Parent == id {
				break
			}
			id = m.Parent
			d++
		}
		return d
	}
	var out []mount
	for _, m := range mounts {
		if chosen[m.ID] {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b mount) int {
		if da, db := depth(a.ID), depth(b.ID); da != db {
			return db - da
		}
		return b.ID - a.ID
	})
	return out
}
