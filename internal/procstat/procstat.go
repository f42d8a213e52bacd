package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what nephele reads of a process's /proc/<pid>/stat.
type Stat struct {
	// PID is the process (field 1); Comm its command name (field 2, without the
	// parentheses).
	PID  int
	Comm string
	// State is the process state (field 3): 'R' running, 'S' sleeping, 'Z' zombie, ...
	State byte
	// PPID is the parent process (field 4), 0 for a process whose parent is outside the
	// PID namespace.
	PPID int
	// StartTime is when the process started, in clock ticks since boot (field 22): a
	// process and a later one that reuses its PID differ in it.
	StartTime uint64
}

// Alive reports whether the process runs: it is neither a zombie ('Z') nor dead ('X').
func (s Stat) Alive() bool {
	return s.State != 'Z' && s.State != 'X'
}

// Read reads the status of process pid.
func Read(pid int) (Stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	s, err := Parse(data)
	if err != nil {
		return Stat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return s, nil
}

// Parse parses the contents of a /proc/<pid>/stat file.
func Parse(data []byte) (Stat, error) {
	line := string(bytes.TrimSpace(data))
	bad := fmt.Errorf("malformed stat line %q", line)
	open := strings.IndexByte(line, '(')
	end := strings.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return Stat{}, bad
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return Stat{}, bad
	}
	// fields[0] is field 3 (state), so field N is fields[N-3].
	fields := strings.Fields(line[end+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return Stat{}, bad
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Stat{}, bad
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return Stat{}, bad
	}
	return Stat{PID: pid, Comm: line[open+1 : end], State: fields[0][0], PPID: ppid, StartTime: start}, nil
}

// Ancestors returns pid's parent, its parent's parent and so on, nearest first, up to
// the first process whose parent is 0 (init, or a process whose parent is outside the
// PID namespace) or cannot be read (it ended meanwhile).
func Ancestors(pid int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	for {
		s, err := Read(pid)
		if err != nil || s.PPID <= 0 || seen[s.PPID] {
			return out
		}
		pid = s.PPID
		seen[pid] = true
		out = append(out, pid)
	}
}

// ByInnerPID returns the processes of a host's PID namespace, by their PID there (the
// last of their status's NSpid) to their PID in the caller's namespace: how the machine
// finds a process a host reports by its PID inside. The host is named by its mount
// namespace file nsFile: its PID namespace is that of its init, the process in that
// mount namespace whose PID is 1 in its own. A process that entered the mount namespace
// from another PID namespace (nsenter from a pod) is not one of them. It reads /proc
// once, a few files per process of the machine.
func ByInnerPID(nsFile string) (map[int]int, error) {
	want, err := os.Stat(nsFile)
	if err != nil {
		return nil, fmt.Errorf("mount namespace %s: %w", nsFile, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	type process struct {
		outer, inner int
		pidNS        os.FileInfo
	}
	var procs []process
	var initNS os.FileInfo
	for _, e := range entries {
		outer, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name()
		pidNS, err := os.Stat(dir + "/ns/pid")
		if err != nil {
			continue // ended meanwhile, or not ours to read
		}
		status, err := os.ReadFile(dir + "/status")
		if err != nil {
			continue
		}
		inner, ok := innermost(status)
		if !ok {
			continue
		}
		procs = append(procs, process{outer, inner, pidNS})
		if inner == 1 && initNS == nil {
			if mnt, err := os.Stat(dir + "/ns/mnt"); err == nil && os.SameFile(mnt, want) {
				initNS = pidNS
			}
		}
	}
	if initNS == nil {
		return nil, fmt.Errorf("mount namespace %s holds no init (a process whose PID is 1 in its own namespace)", nsFile)
	}
	byInner := map[int]int{}
	for _, p := range procs {
		if os.SameFile(p.pidNS, initNS) {
			byInner[p.inner] = p.outer
		}
	}
	return byInner, nil
}

// innermost returns the last PID of a /proc/<pid>/status's NSpid line: the process's PID
// in its own PID namespace.
func innermost(status []byte) (int, bool) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			pid, err := strconv.Atoi(f[len(f)-1])
			return pid, err == nil
		}
	}
	return 0, false
}
