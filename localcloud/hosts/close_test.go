package hosts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
)

// TestCloseReturnsWhenAnAdoptedProcessLivesOn: an adopted boot process that survives
// its stop (it ignores SIGTERM and is in no cgroup of the machine's) neither keeps Close
// waiting nor its poller running. Needs no root: the machine has no network.
func TestCloseReturnsWhenAnAdoptedProcessLivesOn(t *testing.T) {
	dir := t.TempDir()
	stubborn := exec.Command("sh", "-c", `trap "" TERM; echo ready; while :; do sleep 1; done`)
	out, err := stubborn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stubborn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stubborn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-stubborn.Process.Pid, syscall.SIGKILL)
		_ = stubborn.Wait()
	})
	if _, err := out.Read(make([]byte, 6)); err != nil { // the trap is set
		t.Fatal(err)
	}
	var start uint64
	poll.Eventually(t, "the process's start time", func() error {
		var alive bool
		if start, alive = procStart(stubborn.Process.Pid); !alive {
			return os.ErrNotExist
		}
		return nil
	})
	lock, err := os.Create(filepath.Join(dir, lockName))
	if err != nil {
		t.Fatal(err)
	}
	j, err := loadJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := newMachine(Config{Dir: dir, StopTimeout: 100 * time.Millisecond, Logger: testlog.New(t, 0)}, nil, lock, j)
	h := &host{spec: HostSpec{ID: "i-1"}, phase: PhaseRunning, gen: 1}
	m.mu.Lock()
	m.hosts["i-1"] = h
	h.proc = m.adoptProcess(stubborn.Process.Pid, start)
	m.watch(h, h.gen, h.proc)
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(ctx) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v, want nil: the watcher and the poller end with the machine", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waits 20s after it was called with a 5s context")
	}
	if !sameProcess(stubborn.Process.Pid, start) {
		t.Fatal("the stubborn process died: the test tests nothing")
	}
}
