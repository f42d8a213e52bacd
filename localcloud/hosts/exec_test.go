package hosts

import (
	"errors"
	"os/exec"
	"testing"
)

// TestLinkGone checks that both ways ip(8) says a link is not there count as gone, and
// nothing else does. The second one is what a teardown met in CI: the veth went away
// with its peer's namespace between the check and the delete.
func TestLinkGone(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip(8) is needed: install iproute2: %v", err)
	}
	_, missing := run(t.Context(), "", "ip", "link", "del", "nphnolink0")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ip looked the name up", missing, true},
		{"the kernel answered", &commandError{cmd: "ip link del nv0a563003", err: errors.New("exit status 2"),
			stderr: "RTNETLINK answers: No such device"}, true},
		{"permission", &commandError{cmd: "ip link del x", err: errors.New("exit status 2"),
			stderr: "RTNETLINK answers: Operation not permitted"}, false},
		{"not a command's error", errors.New("No such device"), false},
		{"no error", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := linkGone(tc.err); got != tc.want {
				t.Errorf("linkGone(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestDeleteLinkOfNoLink checks that a link that is not there, and an empty name (a
// record that names none), are removed without running ip.
func TestDeleteLinkOfNoLink(t *testing.T) {
	var m Machine // no exec: running ip would panic on its nil fields
	for _, name := range []string{"", "nphnolink0"} {
		if err := m.deleteLink(t.Context(), name); err != nil {
			t.Errorf("deleteLink(%q) = %v, want nil", name, err)
		}
	}
}
