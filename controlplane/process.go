package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Default shutdown timing. kube-apiserver has been seen to take more than 10s to exit
// after SIGTERM once etcd was gone, so the env stops it before etcd and, should it hang
// anyway, kills it.
const (
	defaultStopGrace = 15 * time.Second
	killWait         = 10 * time.Second
)

// Process is one control plane binary running in its own process group, with stdout and
// stderr going to a log file in the env directory.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	grace   time.Duration

	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// StartLogged starts cmd (its path, arguments and environment set by the caller; not its
// output or SysProcAttr) as a Process of no Env: in its own process group, killed by the
// kernel should the starting program die, appending its output to logPath, until Stop.
// It is for a program that must run before a control plane starts, such as the local
// cloud whose bridge address the apiserver listens on (Options.Address).
func StartLogged(name string, cmd *exec.Cmd, logPath string) (*Process, error) {
	return startCommand(name, cmd, logPath)
}

// startCommand starts cmd (its path, arguments and environment set by the caller) in a
// process group of its own, appending its output to logPath. The process lives until
// Stop; no context ends it, because contexts in this package bound startup only.
func startCommand(name string, cmd *exec.Cmd, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	fmt.Fprintf(logFile, "# %s: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(cmd.Args, " "))

	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, grace: defaultStopGrace, done: make(chan struct{})}
	// The waiter is owned by p: it ends when the process exits, which Stop guarantees.
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Name returns the component name, such as "kube-controller-manager".
func (p *Process) Name() string { return p.name }

// Pid returns the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file receiving the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Done returns a channel closed once the process has exited, for whatever reason.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process exited (nil for exit status 0), or nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, waits a bounded time, then sends SIGKILL. It
// returns once the process has exited and is safe to call more than once. It returns an
// error only if the process could not be stopped; how it exited is left to Err, since a
// process killed by a signal has not failed.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *Process) stop() error {
	pgid := p.Pid()
	select {
	case <-p.done:
		// It exited on its own, perhaps long ago. Its group's number is free once the
		// group is empty, and process IDs wrap (at 32768 on many machines): by now it
		// may be the number of another program's group, such as another test's
		// kube-scheduler, which a signal here would kill. So nothing is signalled.
		return nil
	default:
	}
	// Once it has exited, leave no straggler in the group behind, such as a child the
	// process spawned and did not wait for. This runs right after the exit: a group
	// that still has a member keeps its number, and an empty one cannot have been
	// reused within that moment.
	defer signalGroup(pgid, syscall.SIGKILL)
	if err := signalGroup(pgid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %s (pid %d): %w", p.name, pgid, err)
	}
	grace := time.NewTimer(p.grace)
	defer grace.Stop()
	select {
	case <-p.done:
		return nil
	case <-grace.C:
	}
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, pgid, err)
	}
	kill := time.NewTimer(killWait)
	defer kill.Stop()
	select {
	case <-p.done:
		return nil
	case <-kill.C:
		return fmt.Errorf("kill %s (pid %d): still running %v after SIGKILL", p.name, pgid, killWait)
	}
}

// signalGroup signals every process in the group; a group that is already gone is fine.
func signalGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// LogTail returns up to the last n lines of the process's log, for reporting why it
// failed.
func (p *Process) LogTail(n int) string { return logTail(p.logPath, n) }

// exitedError describes a process that exited while it was expected to run, with the end
// of its log so the cause shows up in the caller's output.
func (p *Process) exitedError() error {
	return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.waitErr, p.logPath, indent(logTail(p.logPath, 20)))
}

// logTail returns up to n last lines of a log file.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	// Component logs grow large; the last 64 KiB hold far more than n lines.
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read %s: %v)", path, err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}
