package hosts

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStart returns the start time of process pid (in clock ticks since boot, field 22
// of /proc/<pid>/stat) and whether it is alive: present and not a zombie. The start time
// tells a process from a later one that reuses its PID.
func procStart(pid int) (start uint64, alive bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces or ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return 0, false
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return start, fields[0] != "Z" && fields[0] != "X"
}

// sameProcess reports whether pid is alive and still the process that started at start.
func sameProcess(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	s, alive := procStart(pid)
	return alive && s == start
}

// isExecutable reports whether path is a regular file someone may execute.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// signal sends sig to pid, treating a process that is already gone as success.
func signal(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process %d: %w", sig, pid, err)
	}
	return nil
}
