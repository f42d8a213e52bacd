package kubenode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

func shComponent(t *testing.T, script string) component {
	return component{name: "sh", path: "/bin/sh", args: []string{"-c", script}, logFile: filepath.Join(t.TempDir(), "sh.log")}
}

func TestSuperviseRestartsWithBackoff(t *testing.T) {
	s, err := supervise(shComponent(t, "echo ran; exit 3"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// A restart counts once its process started, before it printed: wait for its line
	// too, or stop could end it first. The next restart is seconds away.
	poll.Eventually(t, "a restart that ran", func() error {
		if s.restartCount() < 1 {
			return errors.New("not restarted yet")
		}
		if out, err := os.ReadFile(s.c.logFile); err != nil || strings.Count(string(out), "ran\n") < 2 {
			return fmt.Errorf("log holds %q (%v)", out, err)
		}
		return nil
	})
	if err := s.stop(time.Second); err != nil {
		t.Fatal(err)
	}
	restarts := s.restartCount()
	// The first backoff is a second, the second two: not more than a few runs so far.
	if restarts > 3 {
		t.Errorf("%d restarts: no backoff", restarts)
	}
	// One line per run; the last run may have been stopped before it printed.
	out, err := os.ReadFile(s.c.logFile)
	if n := strings.Count(string(out), "ran\n"); err != nil || n < restarts || n > restarts+1 {
		t.Errorf("log holds %q (%v), want one line per run (%d runs)", out, err, restarts+1)
	}
}

func TestSuperviseStop(t *testing.T) {
	tests := []struct {
		name, script string
		grace        time.Duration
		atLeast      time.Duration
	}{
		{"SIGTERM", "echo ready; exec sleep 60", 10 * time.Second, 0},
		{"SIGKILL after the grace period", "trap '' TERM; echo ready; sleep 60 & wait; sleep 60", 300 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := supervise(shComponent(t, tt.script), logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			poll.Eventually(t, "the shell to be ready", func() error {
				if out, _ := os.ReadFile(s.c.logFile); !strings.Contains(string(out), "ready") {
					return errors.New("not yet")
				}
				return nil
			})
			began := time.Now()
			if err := s.stop(tt.grace); err != nil {
				t.Fatal(err)
			}
			took := time.Since(began)
			if took < tt.atLeast || took > tt.grace+5*time.Second {
				t.Errorf("stop took %s", took)
			}
			if s.pid() != 0 || s.restartCount() != 0 {
				t.Errorf("after stop: pid %d, restarts %d", s.pid(), s.restartCount())
			}
		})
	}
}

func TestSuperviseMissingBinary(t *testing.T) {
	if _, err := supervise(component{name: "x", path: "/nonexistent", logFile: filepath.Join(t.TempDir(), "x.log")}, logr.Discard()); err == nil {
		t.Error("a missing binary started")
	}
}

// TestSuperviseCapsTheLog: a component that keeps writing does not grow its log past
// the cap; what came before is in <log>.1.
func TestSuperviseCapsTheLog(t *testing.T) {
	c := shComponent(t, `head -c 1000000 /dev/zero | tr '\0' x; echo; exec sleep 60`)
	c.maxLog = 64 << 10
	s, err := supervise(c, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(time.Second)
	poll.Eventually(t, "the log to be trimmed", func() error {
		old, err := os.Stat(c.logFile + ".1")
		if err != nil {
			return err
		}
		now, err := os.Stat(c.logFile)
		if err != nil {
			return err
		}
		if old.Size() < 1000000 || now.Size() > c.maxLog {
			return fmt.Errorf("the log has %d bytes, the old one %d", now.Size(), old.Size())
		}
		return nil
	})
}
