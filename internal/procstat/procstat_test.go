package procstat

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// line is a /proc/<pid>/stat line of a sleeping bash, with comm and state replaced.
func line(comm, state string) string {
	return "4242 (" + comm + ") " + state + " 17 4242 4242 34816 4242 4194560 1133 0 0 0 1 0 0 0 20 0 1 0 987654 8540160 1165 18446744073709551615 1 1 0 0 0 0 65536 3670020 1266777851 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Stat
	}{
		{"plain", line("bash", "S"), Stat{PID: 4242, Comm: "bash", State: 'S', PPID: 17, StartTime: 987654}},
		{"comm with spaces", line("my prog", "R"), Stat{PID: 4242, Comm: "my prog", State: 'R', PPID: 17, StartTime: 987654}},
		{"comm with parentheses", line("a) Z (b", "S"), Stat{PID: 4242, Comm: "a) Z (b", State: 'S', PPID: 17, StartTime: 987654}},
		{"zombie", line("sh", "Z"), Stat{PID: 4242, Comm: "sh", State: 'Z', PPID: 17, StartTime: 987654}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.data))
			if err != nil || got != tt.want {
				t.Errorf("Parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	tests := []struct{ name, data string }{
		{"empty", ""},
		{"no comm", "4242 S 17 4242"},
		{"no pid", "(bash) S 17"},
		{"pid not a number", strings.Replace(line("bash", "S"), "4242", "x", 1)},
		{"truncated", "4242 (bash) S 17 4242 4242"},
		{"state too long", line("bash", "SS")},
		{"ppid not a number", strings.Replace(line("bash", "S"), " 17 ", " x ", 1)},
		{"start time not a number", strings.Replace(line("bash", "S"), " 987654 ", " x ", 1)},
	}
	for _, tt := range tests {
		if s, err := Parse([]byte(tt.data)); err == nil {
			t.Errorf("%s: Parse(%q) = %+v, want an error", tt.name, tt.data, s)
		}
	}
}

func TestAlive(t *testing.T) {
	tests := []struct {
		state byte
		want  bool
	}{{'R', true}, {'S', true}, {'D', true}, {'T', true}, {'Z', false}, {'X', false}}
	for _, tt := range tests {
		if got := (Stat{State: tt.state}).Alive(); got != tt.want {
			t.Errorf("Alive with state %c = %v", tt.state, got)
		}
	}
}

func TestReadSelfAndAncestors(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() || !s.Alive() || s.StartTime == 0 {
		t.Errorf("Read(self) = %+v; want pid %d, parent %d, alive, a start time", s, os.Getpid(), os.Getppid())
	}
	anc := Ancestors(os.Getpid())
	if len(anc) == 0 || anc[0] != os.Getppid() {
		t.Errorf("Ancestors(self) = %v, want the parent %d first", anc, os.Getppid())
	}
	seen := map[int]bool{os.Getpid(): true}
	for _, pid := range anc {
		if seen[pid] {
			t.Errorf("Ancestors(self) = %v repeats %d", anc, pid)
		}
		seen[pid] = true
	}
}

func TestReadZombieAndGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Not waited for yet: once it exits it is a zombie.
	poll.Eventually(t, "the child to be a zombie", func() error {
		s, err := Read(pid)
		if err != nil {
			return err
		}
		if s.Alive() {
			return errors.New("state " + string(s.State))
		}
		return nil
	})
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if s, err := Read(pid); err == nil {
		t.Errorf("Read of a reaped process = %+v", s)
	}
	if anc := Ancestors(pid); len(anc) != 0 {
		t.Errorf("Ancestors of a reaped process = %v", anc)
	}
}

// TestByInnerPIDNeedsTheNamespace: a namespace file that is not there is an error. (A host's
// processes are found in localcloud/hosts' TestHostIsItsOwnPIDNamespace, as root.)
func TestByInnerPIDNeedsTheNamespace(t *testing.T) {
	if _, err := ByInnerPID(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ByInnerPID of a missing namespace file: want an error")
	}
}

// TestInnermost reads the last PID of a status's NSpid line, and nothing from a status
// without one.
func TestInnermost(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int
		ok     bool
	}{
		{"Name:\tsh\nNSpid:\t4242\t7\nNSpgid:\t1\n", 7, true},
		{"Name:\tsh\nNSpid:\t4242\n", 4242, true},
		{"Name:\tsh\nNSpid:\n", 0, false},
		{"Name:\tsh\nNSpid:\tx\n", 0, false},
		{"Name:\tsh\n", 0, false},
	} {
		if got, ok := innermost([]byte(tc.status)); got != tc.want || ok != tc.ok {
			t.Errorf("innermost(%q) = %d, %v; want %d, %v", tc.status, got, ok, tc.want, tc.ok)
		}
	}
}
