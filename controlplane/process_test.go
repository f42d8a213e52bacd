package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// startShell runs a shell script as a Process and stops it when the test ends.
func startShell(t *testing.T, script string) *Process {
	t.Helper()
	p, err := startCommand("sh", exec.Command("/bin/sh", "-c", script), filepath.Join(t.TempDir(), "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// output returns what the process wrote, without the command line startProcess logs first.
func output(t *testing.T, p *Process) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := strings.Cut(string(b), "\n")
	return out
}

// waitForOutput waits until the process has written want, so signals arrive after the
// script set itself up.
func waitForOutput(t *testing.T, p *Process, want string) string {
	t.Helper()
	var out string
	poll.Within(t, 30*time.Second, fmt.Sprintf("%s to write %q", p.Name(), want), func() error {
		if out = output(t, p); !strings.Contains(out, want) {
			return fmt.Errorf("output:\n%s", out)
		}
		return nil
	})
	return out
}

// childPid reads the pid a script wrote as "child=PID".
func childPid(t *testing.T, p *Process) int {
	t.Helper()
	_, after, _ := strings.Cut(waitForOutput(t, p, "child="), "child=")
	pid, err := strconv.Atoi(strings.Fields(after)[0])
	if err != nil {
		t.Fatalf("parse child pid from %q: %v", after, err)
	}
	return pid
}

// assertGone checks that no live process is left in the group, the given pids included.
// Zombies count as gone: they have exited and wait for whoever reparented them to reap them.
func assertGone(t *testing.T, pgid int, pids ...int) {
	t.Helper()
	poll.Within(t, 10*time.Second, fmt.Sprintf("the processes of group %d to exit", pgid), func() error {
		left := liveGroupMembers(t, pgid)
		for _, pid := range pids {
			if state, pgrp, ok := procStat(pid); ok && state != "Z" && pgrp != pgid {
				left = append(left, pid)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("processes %v still running", left)
		}
		return nil
	})
}

// liveGroupMembers lists the processes in group pgid that have not exited.
func liveGroupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := procStat(pid); ok && pgrp == pgid && state != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat returns a process's state and process group from /proc, ok false if it is gone.
func procStat(pid int) (state string, pgrp int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// The command name in parentheses may hold spaces; the fields after it do not.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:])) // state ppid pgrp ...
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	if err != nil {
		return "", 0, false
	}
	return f[0], pgrp, true
}

func TestProcessStop(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		grace      time.Duration
		wantSignal syscall.Signal
	}{
		{
			name:       "SIGTERM ends the whole group",
			script:     `sleep 300 & echo child=$!; wait`,
			grace:      defaultStopGrace,
			wantSignal: syscall.SIGTERM,
		},
		{
			name:       "SIGKILL after the grace period when SIGTERM is ignored",
			script:     `trap "" TERM; sleep 300 & echo child=$!; wait`,
			grace:      200 * time.Millisecond,
			wantSignal: syscall.SIGKILL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startShell(t, tt.script)
			p.grace = tt.grace
			child := childPid(t, p)

			if err := p.Stop(); err != nil {
				t.Fatalf("Stop() error: %v", err)
			}
			select {
			case <-p.Done():
			default:
				t.Fatal("Stop() returned before the process exited")
			}
			var exitErr *exec.ExitError
			if err := p.Err(); !errors.As(err, &exitErr) {
				t.Errorf("Err() = %v, want an exit by %v", err, tt.wantSignal)
			} else if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != tt.wantSignal {
				t.Errorf("Err() = %v, want an exit by %v", err, tt.wantSignal)
			}
			assertGone(t, p.Pid(), child)
			if err := p.Stop(); err != nil {
				t.Errorf("second Stop() error: %v", err)
			}
		})
	}
}

func TestProcessExitedOnItsOwn(t *testing.T) {
	p := startShell(t, `echo going away; exit 3`)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("process did not exit")
	}
	var exitErr *exec.ExitError
	if err := p.Err(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("Err() = %v, want exit status 3", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop() after exit: %v", err)
	}
	if msg := p.exitedError().Error(); !strings.Contains(msg, "going away") {
		t.Errorf("exitedError() = %q, want the end of the log", msg)
	}
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat(strings.Repeat("x", 1000)+"\n", 200) + "last\n"
	tests := []struct {
		name    string
		content string
		n       int
		want    string
	}{
		{name: "fewer lines than asked", content: "a\nb\n", n: 5, want: "a\nb"},
		{name: "last lines", content: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
		{name: "no trailing newline", content: "a\nb", n: 1, want: "b"},
		{name: "large file", content: long, n: 1, want: "last"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(i)+".log")
			writeFile(t, path, tt.content, 0o644)
			if got := logTail(path, tt.n); got != tt.want {
				t.Errorf("logTail() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProcessWaitFor(t *testing.T) {
	errNotYet := errors.New("not yet")
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		// succeedAfter is how many checks fail before one succeeds; -1 never.
		succeedAfter int
		wantErr      []string
	}{
		{name: "check succeeds", script: "exec sleep 300", timeout: time.Minute, succeedAfter: 2},
		{
			name: "process exits", script: "echo dying words; exit 4", timeout: time.Minute, succeedAfter: -1,
			wantErr: []string{"waiting for the thing: sh exited (exit status 4)", "dying words"},
		},
		{
			name: "context ends", script: "exec sleep 300", timeout: 500 * time.Millisecond, succeedAfter: -1,
			wantErr: []string{"waiting for the thing: context deadline exceeded", "last error: not yet"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startShell(t, tt.script)
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			calls := 0
			err := p.WaitFor(ctx, "the thing", func(context.Context) error {
				calls++
				if tt.succeedAfter >= 0 && calls > tt.succeedAfter {
					return nil
				}
				return errNotYet
			})
			if len(tt.wantErr) == 0 {
				if err != nil || calls != tt.succeedAfter+1 {
					t.Fatalf("WaitFor() = %v after %d checks, want nil after %d", err, calls, tt.succeedAfter+1)
				}
				return
			}
			if err == nil {
				t.Fatal("WaitFor() succeeded")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("WaitFor() error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}
