package hosts

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/nephele-dev/nephele/internal/procstat"
)

// procStart returns the start time of process pid (in clock ticks since boot) and
// whether it is alive: present and not a zombie. The start time tells a process from a
// later one that reuses its PID.
func procStart(pid int) (start uint64, alive bool) {
	s, err := procstat.Read(pid)
	if err != nil {
		return 0, false
	}
	return s.StartTime, s.Alive()
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
