package proctest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Mentioning returns the pids of the live processes other than the test's own whose
// command line contains s: how a test that gave a program a directory of its own sees
// whether the program left anything running. Exited processes not yet reaped (zombies)
// have no command line and do not count.
func Mentioning(t testing.TB, s string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing processes: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
