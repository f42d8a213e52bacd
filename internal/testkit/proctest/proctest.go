package proctest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv marks a child started by Start; its value is the name given to Start.
const childEnv = "NEPHELE_PROCTEST_CHILD"

// Timeout is a generous bound on how long a program takes to start, answer or stop: far
// more than it takes on an idle machine, so that load never fails a test.
const Timeout = 90 * time.Second

// Main runs program and exits with the code it returns when this process is a child
// that Start started; in the test binary proper it returns at once. Call it first in
// TestMain. The child's environment no longer marks it, so programs it starts in turn
// are not taken for children.
func Main(program func() int) {
	if _, ok := os.LookupEnv(childEnv); !ok {
		return
	}
	_ = os.Unsetenv(childEnv)
	os.Exit(program())
}

// Process is a program a test started: the test binary running as the program (Start)
// or another binary (Exec).
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *buffer
	done chan struct{}
	err  error // set before done is closed
}

// Start runs the test binary as the program with args (os.Args[1:] in the child) and the
// test's environment. name says which program it is in messages. stdout and stderr go
// to Output. The process is killed and reaped when the test ends, and its output logged
// if the test failed.
func Start(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	return start(t, name, cmd)
}

// Exec runs the binary at path with args and the test's environment, as Start runs the
// test binary: for a program the test built.
func Exec(t testing.TB, name, path string, args ...string) *Process {
	t.Helper()
	return start(t, name, exec.Command(path, args...))
}

func start(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{name: name, cmd: cmd, out: &buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s (pid %d) %s, output:\n%s", name, p.Pid(), strings.Join(cmd.Args[1:], " "), p.Output())
		}
	})
	return p
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output returns what the process has written to stdout and stderr so far.
func (p *Process) Output() string { return p.out.String() }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process with SIGKILL, which it cannot handle, and waits until it has
// exited. Killing a process that has exited does nothing.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Done returns a channel closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process exited: nil for exit code 0, an *exec.ExitError otherwise.
// It returns nil while the process runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Wait waits up to timeout for the process to exit and returns its exit code, -1 if a
// signal killed it. It fails the test if the process is still running then.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s (pid %d) did not exit within %s", p.name, p.Pid(), timeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

// Stop sends SIGTERM and waits up to timeout for the process to exit. It fails the test
// unless the process exits, and exits cleanly (code 0).
func (p *Process) Stop(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("stopping %s (pid %d): %v", p.name, p.Pid(), err)
	}
	if code := p.Wait(t, timeout); code != 0 {
		t.Fatalf("%s (pid %d) exited with code %d after SIGTERM, want a clean exit", p.name, p.Pid(), code)
	}
}

// WaitOutput waits up to timeout until the process has written s. It fails the test if
// the process exits first or the time runs out, quoting the output.
func (p *Process) WaitOutput(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.Output(), s) {
		select {
		case <-p.done:
			if strings.Contains(p.Output(), s) {
				return
			}
			t.Fatalf("%s exited (%v) before writing %q; output:\n%s", p.name, p.err, s, p.Output())
		case <-deadline:
			t.Fatalf("%s did not write %q within %s; output:\n%s", p.name, s, timeout, p.Output())
		case <-tick.C:
		}
	}
}

// buffer is a bytes.Buffer the process writes to while the test reads it.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
