package kubenode

import (
	"slices"
	"strings"

	"github.com/nephele-dev/nephele/internal/mountinfo"
)

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// unmountOrder returns the mounts to take down, children before their parents: every
// mount selected, and every mount on top of or inside one.
func unmountOrder(mounts []mountinfo.Mount, selected func(mountinfo.Mount) bool) []mountinfo.Mount {
	byID := map[int]mountinfo.Mount{}
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
	var out []mountinfo.Mount
	for _, m := range mounts {
		if chosen[m.ID] {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b mountinfo.Mount) int {
		if da, db := depth(a.ID), depth(b.ID); da != db {
			return db - da
		}
		return b.ID - a.ID
	})
	return out
}
