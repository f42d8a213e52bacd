package kubenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/internal/logcap"
)

// Restart backoff of a supervised component: it doubles from backoffMin to backoffMax,
// and starts again from backoffMin once a run lasted stableRun.
const (
	backoffMin = time.Second
	backoffMax = 30 * time.Second
	stableRun  = time.Minute
)

// Component logs: each is trimmed to logSize (its content moves to <log>.1) whenever
// the runtime finds it larger, every logCheck.
const (
	logSize  = 64 << 20
	logCheck = 5 * time.Second
)

// component is a program the runtime runs and restarts.
type component struct {
	name string
	path string
	args []string
	env  []string
	// logFile receives its output, appended across runs, capped at maxLog (logSize
	// when 0).
	logFile string
	maxLog  int64
}

// supervised is a running component: it is restarted with backoff whenever it exits,
// until stop.
type supervised struct {
	c   component
	log logr.Logger

	mu       sync.Mutex
	proc     *os.Process
	restarts int
	stopping bool

	wake chan struct{} // closed by stop: ends a backoff wait
	done chan struct{} // closed when the loop has ended and no process is left
}

// supervise starts c and keeps it running. The first start's error is returned (the
// binary is missing, say); later ones are logged and retried.
func supervise(c component, log logr.Logger) (*supervised, error) {
	s := &supervised{c: c, log: log.WithValues("component", c.name), wake: make(chan struct{}), done: make(chan struct{})}
	cmd, err := s.start()
	if err != nil {
		return nil, err
	}
	go s.loop(cmd)
	go s.capLog()
	return s, nil
}

// capLog trims the component's log until supervision has ended.
func (s *supervised) capLog() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-s.done
		cancel()
	}()
	limit := s.c.maxLog
	if limit <= 0 {
		limit = logSize
	}
	logcap.Keep(ctx, logCheck, limit, func() []string { return []string{s.c.logFile} },
		func(path string, err error) { s.log.Error(err, "Trimming the log", "log", path) })
}

// start runs the component once. Its process gets its own process group, so a signal
// meant for the runtime's terminal does not reach it before its turn, and is killed by
// the kernel if the runtime dies.
func (s *supervised) start() (*exec.Cmd, error) {
	if err := os.MkdirAll(filepath.Dir(s.c.logFile), 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.c.name, err)
	}
	out, err := os.OpenFile(s.c.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.c.name, err)
	}
	defer out.Close() // the child holds its own descriptor
	cmd := exec.Command(s.c.path, s.c.args...)
	cmd.Env = s.c.env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, fmt.Errorf("start %s: stopping", s.c.name)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.c.name, err)
	}
	s.proc = cmd.Process
	s.log.Info("Started", "pid", cmd.Process.Pid, "log", s.c.logFile)
	return cmd, nil
}

// loop waits for the process and restarts it until stop.
func (s *supervised) loop(cmd *exec.Cmd) {
	defer close(s.done)
	backoff := backoffMin
	for {
		began := time.Now()
		err := cmd.Wait()
		ran := time.Since(began)
		s.mu.Lock()
		s.proc = nil
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			s.log.Info("Stopped", "status", exitStatus(err), "ran", ran.Round(time.Millisecond))
			return
		}
		if ran >= stableRun {
			backoff = backoffMin
		}
		s.log.Error(nil, "Exited; restarting", "status", exitStatus(err), "ran", ran.Round(time.Millisecond), "restartIn", backoff, "log", s.c.logFile)
		select {
		case <-time.After(backoff):
		case <-s.wake:
			return
		}
		backoff = min(2*backoff, backoffMax)
		for {
			next, err := s.start()
			if err == nil {
				cmd = next
				s.mu.Lock()
				s.restarts++
				s.mu.Unlock()
				break
			}
			s.mu.Lock()
			stopping := s.stopping
			s.mu.Unlock()
			if stopping {
				return
			}
			s.log.Error(err, "Restart failed", "retryIn", backoff)
			select {
			case <-time.After(backoff):
			case <-s.wake:
				return
			}
			backoff = min(2*backoff, backoffMax)
		}
	}
}

// exitStatus describes how a process ended.
func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("exit %d", exit.ExitCode())
	}
	return err.Error()
}

// pid is the running process's ID, or 0 between runs.
func (s *supervised) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid
}

// restartCount is how often the component was restarted.
func (s *supervised) restartCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// stop ends supervision: SIGTERM, and SIGKILL if the process is still there after grace.
// It returns once the process is gone, or killWait after the SIGKILL.
func (s *supervised) stop(grace time.Duration) error {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.wake)
	}
	proc := s.proc
	s.mu.Unlock()
	if proc != nil {
		_ = proc.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(grace):
	}
	s.mu.Lock()
	proc = s.proc
	s.mu.Unlock()
	if proc != nil {
		s.log.Info("Did not stop in time; killing it", "grace", grace)
		_ = proc.Kill()
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s did not exit within %s of SIGKILL", s.c.name, killWait)
	}
}
