package kubenode

import (
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/mountinfo"
)

const testMountinfo = `21 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
22 21 0:20 / /run rw,nosuid shared:2 - tmpfs tmpfs rw
30 22 0:40 / /run rw,nosuid - tmpfs nephele-node rw,size=65536k
31 30 254:0 /srv/hosts/a /run/hosts/a rw - ext4 /dev/vda rw
32 21 0:41 / /var/lib rw - tmpfs nephele-node rw
33 21 0:5 /sysctl/vm.overcommit_memory /proc/sys/vm/overcommit_memory ro - tmpfs nephele-node rw
40 31 0:50 / /run/hosts/a/node/containerd/state/netns/cni-1 rw - nsfs nsfs rw
41 21 0:51 / /srv/hosts/a/node/kubelet rw - ext4 /dev/vda rw
42 41 0:52 / /srv/hosts/a/node/kubelet/pods/x/volumes/token rw - tmpfs tmpfs rw
43 21 0:53 / /srv/with\040space rw - ext4 /dev/vda rw
50 21 0:54 / /srv/hosts/b/node/kubelet rw - ext4 /dev/vda rw
`

func TestUnmountOrder(t *testing.T) {
	mounts, err := mountinfo.Parse(strings.NewReader(testMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	order := unmountOrder(mounts, func(m mountinfo.Mount) bool {
		return m.Source == privateSource || under(m.Point, "/srv/hosts/a/node")
	})
	// The netns (40) under the kept host dir (31) under /run (30), the token volume (42)
	// under kubelet's bind (41), /var/lib (32) and the sysctl mask (33) go; node b's
	// mount (50) and the machine's own /run (22) stay. Children go before parents.
	want := map[int]bool{30: true, 31: true, 32: true, 33: true, 40: true, 41: true, 42: true}
	pos := map[int]int{}
	for i, m := range order {
		if !want[m.ID] {
			t.Errorf("mount %d (%s) would be unmounted", m.ID, m.Point)
		}
		pos[m.ID] = i
	}
	if len(order) != len(want) {
		t.Errorf("%d mounts to unmount, want %d", len(order), len(want))
	}
	for _, m := range order {
		if p, ok := pos[m.Parent]; ok && p < pos[m.ID] {
			t.Errorf("mount %d comes after its parent %d", m.ID, m.Parent)
		}
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a/b", "/a/", true},
		{"/", "/a", false},
	}
	for _, tt := range tests {
		if got := under(tt.path, tt.dir); got != tt.want {
			t.Errorf("under(%q, %q) = %v", tt.path, tt.dir, got)
		}
	}
}
